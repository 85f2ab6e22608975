package service

// Claims is the claims family: claims, receipts, progress, testaments,
// artifacts and checks. (Declared by the claims family's change.)
type Claims interface{}
