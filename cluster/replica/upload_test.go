package replica

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"tally/artifact"
	"tally/cluster/node"
	"tally/digest"
	"tally/refuse"
	"tally/rest"
	"tally/service"
	"tally/store"
)

// use is a test method: it reads the upload its document names through
// OpenUpload and stores the bytes in the content store, as the Service
// does with an artifact's, and returns their content digest.
func use(sm **SM) Method {
	return func(ctx context.Context, _ service.Service, c service.Call, doc []byte) (any, error) {
		var u Upload
		if err := json.Unmarshal(doc, &u); err != nil {
			return nil, err
		}
		body, err := (*sm).OpenUpload(c, u)
		if err != nil {
			return nil, err
		}
		defer body.Close()
		objs, err := artifact.OpenStore(store.ObjectsDir((*sm).Root()))
		if err != nil {
			return nil, err
		}
		d, _, err := objs.Put(ctx, body)
		if err != nil {
			return nil, err
		}
		return d.String(), nil
	}
}

// start is the instant the test uploads start at; entry i is at start+i s.
var start = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func at(index uint64) int64 { return start.Add(time.Duration(index) * time.Second).UnixNano() }

func chunkEntry(t *testing.T, index uint64, id string, offset int64, b []byte) node.Entry {
	t.Helper()
	doc, _ := json.Marshal(StageDoc{Upload: id, Offset: offset})
	data, err := Command{Method: MethodStage, Tenant: "acme", Session: "s", TS: at(index), Doc: doc, Payload: b}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return node.Entry{Index: index, Kind: node.KindCommand, Data: data}
}

func useEntry(t *testing.T, index uint64, u Upload) node.Entry {
	t.Helper()
	doc, _ := json.Marshal(u)
	data, err := Command{Method: "use", Tenant: "acme", Session: "s", TS: at(index), Doc: doc}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return node.Entry{Index: index, Kind: node.KindCommand, Data: data}
}

// upload names body as its proposer would.
func upload(id string, body []byte) Upload {
	return Upload{ID: id, Size: int64(len(body)), Content: digest.HashContent(body).String()}
}

// applyAll applies batches to sm and returns each entry's outcome.
func applyAll(t *testing.T, sm *SM, batches ...[]node.Entry) map[uint64]Outcome {
	t.Helper()
	group := node.MetaGroup + 1
	outs := map[uint64]Outcome{}
	for _, b := range batches {
		if _, err := sm.Apply(group, b); err != nil {
			t.Fatal(err)
		}
		for _, e := range b {
			outs[e.Index], _ = sm.Take(group, e.Index)
		}
	}
	return outs
}

func staged(t *testing.T, sm *SM) []string {
	t.Helper()
	ents, err := os.ReadDir(sm.stagingDir(node.MetaGroup + 1))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// A command's payload travels raw after its JSON, and comes back whole.
func TestCommandPayloadRoundTrip(t *testing.T) {
	payload := bytes.Repeat([]byte{0, 1, 2, 0xff}, 1000)
	c := Command{Method: MethodStage, Tenant: "acme", Session: "s", TS: 7, Doc: json.RawMessage(`{"upload":"u","offset":0}`), Payload: payload}
	b, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := json.Marshal(c)
	if len(b) > len(plain)+len(payload)+1+4 {
		t.Fatalf("an entry of %d bytes for %d of payload and %d of JSON", len(b), len(payload), len(plain))
	}
	back, err := DecodeCommand(b)
	if err != nil || !bytes.Equal(back.Payload, payload) || back.Method != c.Method || string(back.Doc) != string(c.Doc) {
		t.Fatalf("decoded %+v, %v", back, err)
	}
	if _, err := DecodeCommand(append([]byte{payloadFrame}, 0xff, 0xff, 0x7f)); err == nil {
		t.Fatal("a frame whose length passes its end decoded")
	}
	noPayload, _ := Command{Method: "m", TS: 1}.Encode()
	if back, err := DecodeCommand(noPayload); err != nil || back.Payload != nil || noPayload[0] != '{' {
		t.Fatalf("a command without payload: %q %+v %v", noPayload, back, err)
	}
}

// Chunks staged in order make the upload; a chunk committed twice stages
// once; one past the end is refused; the command that uses the upload
// reads exactly its bytes, and its file goes; a command naming it again
// reads the same bytes from the content store; a chunk after the use, or
// a use naming other bytes, is refused.
func TestStageAndUseAnUpload(t *testing.T) {
	sm, db := openReplica(t, t.TempDir(), "")
	defer db.Close()
	defer sm.Close()
	body := []byte(strings.Repeat("patch A\n", 100))
	id := NewUploadID(start, 1)
	u := upload(id, body)
	outs := applyAll(t, sm,
		[]node.Entry{chunkEntry(t, 2, id, 0, body[:300]), chunkEntry(t, 3, id, 0, body[:300])},
		[]node.Entry{chunkEntry(t, 4, id, 500, body[500:]), chunkEntry(t, 5, id, 300, body[300:])},
	)
	if outs[2].Value != int64(300) || outs[3].Value != int64(300) || outs[5].Value != int64(len(body)) {
		t.Fatalf("staged: %+v %+v %+v", outs[2], outs[3], outs[5])
	}
	if r, ok := refuse.As(outs[4].Err); !ok || r.Code != refuse.Conflict || r.Field != "offset" {
		t.Fatalf("a chunk past the end: %v", outs[4].Err)
	}
	short := u
	short.Size--
	other := upload(id, []byte("other"))
	outs = applyAll(t, sm, []node.Entry{useEntry(t, 6, short), useEntry(t, 7, u), useEntry(t, 8, u), useEntry(t, 9, other), chunkEntry(t, 10, id, int64(len(body)), []byte("more"))})
	if r, ok := refuse.As(outs[6].Err); !ok || r.Code != refuse.Conflict {
		t.Fatalf("a use naming fewer bytes than staged: %v", outs[6].Err)
	}
	if outs[7].Err != nil || outs[7].Value != u.Content || outs[8].Value != u.Content {
		t.Fatalf("uses: %+v %+v", outs[7], outs[8])
	}
	for _, i := range []uint64{9, 10} {
		if r, ok := refuse.As(outs[i].Err); !ok || r.Code != refuse.Conflict {
			t.Fatalf("entry %d after the use: %v", i, outs[i].Err)
		}
	}
	if left := staged(t, sm); len(left) != 0 {
		t.Fatalf("staging files left after the use: %v", left)
	}
	// An upload of no bytes has no chunk: its use reads nothing.
	empty := upload(NewUploadID(start, 9), nil)
	if out := applyAll(t, sm, []node.Entry{useEntry(t, 11, empty)})[11]; out.Err != nil || out.Value != empty.Content {
		t.Fatalf("the use of an empty upload: %+v", out)
	}
}

// A batch of chunks cut short by a crash (its bytes written, its records
// not) is cut back at the restart and applied again: the upload holds its
// bytes once. A file the crash left without a record, or of an upload
// already used, goes.
func TestStagedBytesCutBackAfterACrash(t *testing.T) {
	dir := t.TempDir()
	sm, db := openReplica(t, dir, "")
	body := []byte(strings.Repeat("0123456789", 50))
	id, used := NewUploadID(start, 2), NewUploadID(start, 7)
	applyAll(t, sm, []node.Entry{chunkEntry(t, 2, id, 0, body[:200]), chunkEntry(t, 3, used, 0, []byte("u")), useEntry(t, 4, upload(used, []byte("u")))})
	// The next batch's chunk reached the file, not the records; a new
	// upload's file has no record; a used upload's file stayed.
	sd := sm.stagingDir(node.MetaGroup + 1)
	f, err := os.OpenFile(filepath.Join(sd, id), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(body[200:350])
	f.Close()
	for _, name := range []string{NewUploadID(start, 8), used} {
		if err := os.WriteFile(filepath.Join(sd, name), []byte("left"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sm.Close()
	db.Close()

	sm, db = openReplica(t, dir, "")
	defer db.Close()
	defer sm.Close()
	if a, err := sm.Applied(node.MetaGroup + 1); err != nil || a != 4 {
		t.Fatalf("applied after the restart: %d %v", a, err)
	}
	if left := staged(t, sm); !slices.Equal(left, []string{id}) {
		t.Fatalf("staging files after the restart: %v, want %s alone", left, id)
	}
	if fi, err := os.Stat(filepath.Join(sd, id)); err != nil || fi.Size() != 200 {
		t.Fatalf("the staged file after the restart: %v %v, want 200 bytes", fi.Size(), err)
	}
	outs := applyAll(t, sm, []node.Entry{chunkEntry(t, 5, id, 200, body[200:350]), chunkEntry(t, 6, id, 350, body[350:])}, []node.Entry{useEntry(t, 7, upload(id, body))})
	if outs[7].Err != nil || outs[7].Value != upload(id, body).Content {
		t.Fatalf("the upload after the replay: %+v", outs[7])
	}
}

// A batch that uses an upload removes its staging file only once the
// record saying it was used is durable: a crash that lost the batch's
// applied index would replay the command, whose bytes would be gone.
func TestAUsedUploadSurvivesACrashAfterItsBatch(t *testing.T) {
	dir, mem := t.TempDir(), vfs.NewCrashableMem()
	sm, db := openReplicaOn(t, dir, mem)
	body := []byte(strings.Repeat("patch\n", 50))
	id := NewUploadID(start, 3)
	u := upload(id, body)
	outs := applyAll(t, sm, []node.Entry{chunkEntry(t, 2, id, 0, body)}, []node.Entry{useEntry(t, 3, u)})
	if outs[3].Err != nil || outs[3].Value != u.Content {
		t.Fatalf("the use: %+v", outs[3])
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{})
	sm.Close()
	db.Close()

	sm, db = openReplicaOn(t, dir, crashed)
	defer db.Close()
	defer sm.Close()
	a, err := sm.Applied(node.MetaGroup + 1)
	if err != nil {
		t.Fatal(err)
	}
	if a < 3 {
		// Raft hands the lost entries again: they must apply to the same.
		var again []node.Entry
		for _, e := range []node.Entry{chunkEntry(t, 2, id, 0, body), useEntry(t, 3, u)} {
			if e.Index > a {
				again = append(again, e)
			}
		}
		outs = applyAll(t, sm, again)
		if outs[3].Err != nil || outs[3].Value != u.Content {
			t.Fatalf("the use applied again after a crash (applied %d): %+v", a, outs[3])
		}
	}
}

// An upload started more than UploadMaxAge before a command's instant is
// refused by it, and its record and file go after the batch.
func TestAnAbandonedUploadExpires(t *testing.T) {
	sm, db := openReplica(t, t.TempDir(), "")
	defer db.Close()
	defer sm.Close()
	id := NewUploadID(start, 3)
	applyAll(t, sm, []node.Entry{chunkEntry(t, 2, id, 0, []byte("abc"))})
	late := uint64(UploadMaxAge/time.Second) + 10
	outs := applyAll(t, sm, []node.Entry{chunkEntry(t, late, id, 3, []byte("def"))})
	if r, ok := refuse.As(outs[late].Err); !ok || r.Code != refuse.Conflict || !strings.Contains(r.Rule, "abandoned") {
		t.Fatalf("a chunk of an abandoned upload: %v", outs[late].Err)
	}
	if left := staged(t, sm); len(left) != 0 {
		t.Fatalf("staging files of an abandoned upload: %v", left)
	}
	n := 0
	sm.eachUpload(node.MetaGroup+1, func(string, uploadRecord) error { n++; return nil })
	if n != 0 {
		t.Fatalf("%d records of an abandoned upload", n)
	}
}

// A chunk that would take an upload past MaxUploadSize is refused with a
// 413 naming the bound, and stages nothing.
func TestAnUploadPastItsBoundIsRefused(t *testing.T) {
	sm, db := openReplica(t, t.TempDir(), "")
	defer db.Close()
	defer sm.Close()
	group := node.MetaGroup + 1
	id := NewUploadID(start, 4)
	// An upload holding all but 4 bytes of the bound, without writing them.
	if err := os.MkdirAll(sm.stagingDir(group), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(sm.stagingDir(group), id)
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, MaxUploadSize-4); err != nil {
		t.Fatal(err)
	}
	if err := sm.dataSM.commit(func(b *pebble.Batch) error {
		return setJSON(b, uploadKey(group, id), uploadRecord{Size: MaxUploadSize - 4})
	}, true); err != nil {
		t.Fatal(err)
	}
	outs := applyAll(t, sm, []node.Entry{chunkEntry(t, 2, id, MaxUploadSize-4, []byte("12345678")), chunkEntry(t, 3, id, MaxUploadSize-4, []byte("1234"))})
	var ref *rest.Refusal
	if !errors.As(outs[2].Err, &ref) || ref.Status != http.StatusRequestEntityTooLarge || !strings.Contains(ref.Message, "67108864") {
		t.Fatalf("a chunk past the bound: %v", outs[2].Err)
	}
	if outs[3].Err != nil || outs[3].Value != int64(MaxUploadSize) {
		t.Fatalf("a chunk up to the bound: %+v", outs[3])
	}
}

// A snapshot carries the group's staged uploads and the objects of its
// used ones: the replica that installs it decides the next commands as the
// source does, and holds the same objects.
func TestSnapshotCarriesUploads(t *testing.T) {
	src, srcDB := openReplica(t, t.TempDir(), "")
	defer srcDB.Close()
	defer src.Close()
	partial, whole := []byte(strings.Repeat("half ", 300)), []byte("used before the snapshot")
	p, w := NewUploadID(start, 5), NewUploadID(start, 6)
	applyAll(t, src, []node.Entry{chunkEntry(t, 2, p, 0, partial[:700]), chunkEntry(t, 3, w, 0, whole), useEntry(t, 4, upload(w, whole))})
	dst := restoredCopy(t, src, 4)
	next := []node.Entry{chunkEntry(t, 5, p, 700, partial[700:]), useEntry(t, 6, upload(p, partial)), useEntry(t, 7, upload(w, whole))}
	want := applyAll(t, src, next)
	got := applyAll(t, dst, next)
	for i := uint64(5); i <= 7; i++ {
		if got[i].Err != nil || want[i].Err != nil || got[i].Value != want[i].Value {
			t.Fatalf("entry %d: installed %+v, source %+v", i, got[i], want[i])
		}
	}
	objects := func(sm *SM) []string {
		var out []string
		filepath.WalkDir(store.ObjectsDir(sm.Root()), func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				out = append(out, filepath.Base(p))
			}
			return nil
		})
		return out
	}
	if a, b := objects(src), objects(dst); !slices.Equal(a, b) || len(a) != 2 {
		t.Fatalf("objects: source %v, installed %v", a, b)
	}
}

// A crash that loses a batch's records after the batch used an upload (the
// applied index is written without a sync) leaves the upload unused on
// the restart, and the batch runs again: its staging file must still be
// there to be read, rather than removed before the record of its use was
// durable (the replay would find the bytes gone and stop the node).
func TestAUsedUploadSurvivesACrashLosingItsRecord(t *testing.T) {
	dir, mem := t.TempDir(), vfs.NewCrashableMem()
	sm, db := openReplicaOn(t, dir, mem)
	group := node.MetaGroup + 1
	body := []byte(strings.Repeat("patch B\n", 64))
	id := NewUploadID(start, 11)
	applyAll(t, sm, []node.Entry{chunkEntry(t, 2, id, 0, body)})
	if err := db.SyncWAL(); err != nil {
		t.Fatal(err)
	}
	use := []node.Entry{useEntry(t, 3, upload(id, body))}
	if out := applyAll(t, sm, use)[3]; out.Err != nil {
		t.Fatalf("the use: %+v", out)
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{})
	sm.Close()
	db.Close()

	sm, db = openReplicaOn(t, dir, crashed)
	defer db.Close()
	defer sm.Close()
	a, err := sm.Applied(group)
	if err != nil {
		t.Fatal(err)
	}
	if a < 3 {
		// The use's batch was lost with its records: raft applies it again.
		if out := applyAll(t, sm, use)[3]; out.Err != nil || out.Value != upload(id, body).Content {
			t.Fatalf("the use applied again after the crash: %+v", out)
		}
	}
	objs, err := artifact.OpenStore(store.ObjectsDir(sm.Root()))
	if err != nil {
		t.Fatal(err)
	}
	if err := objs.Verify(context.Background(), digest.HashContent(body)); err != nil {
		t.Fatalf("the upload's object after the crash: %v", err)
	}
}

func unstageEntry(t *testing.T, index uint64, id string) node.Entry {
	t.Helper()
	doc, _ := json.Marshal(StageDoc{Upload: id})
	data, err := Command{Method: MethodUnstage, Tenant: "acme", Session: "s", TS: at(index), Doc: doc}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return node.Entry{Index: index, Kind: node.KindCommand, Data: data}
}

// An upload whose write failed is abandoned at once: its record and its
// staged bytes go after the batch, on every replica; a chunk of it later
// in the same batch is refused; a used upload is not abandoned.
func TestAnUnstagedUploadGoesAtOnce(t *testing.T) {
	sm, db := openReplica(t, t.TempDir(), "")
	defer db.Close()
	defer sm.Close()
	id, kept := NewUploadID(start, 4), NewUploadID(start, 5)
	applyAll(t, sm, []node.Entry{chunkEntry(t, 2, id, 0, []byte("abc")), chunkEntry(t, 3, kept, 0, []byte("kept"))})
	outs := applyAll(t, sm, []node.Entry{chunkEntry(t, 4, id, 3, []byte("def")), unstageEntry(t, 5, id), chunkEntry(t, 6, id, 6, []byte("ghi"))})
	if outs[4].Err != nil || outs[5].Err != nil || outs[5].Value != int64(6) {
		t.Fatalf("stage, unstage: %+v %+v", outs[4], outs[5])
	}
	if r, ok := refuse.As(outs[6].Err); !ok || r.Code != refuse.Conflict || !strings.Contains(r.Rule, "was abandoned") {
		t.Fatalf("a chunk after the unstage: %v", outs[6].Err)
	}
	if left := staged(t, sm); !slices.Equal(left, []string{kept}) {
		t.Fatalf("staging files after the unstage: %v", left)
	}
	var ids []string
	sm.eachUpload(node.MetaGroup+1, func(id string, _ uploadRecord) error { ids = append(ids, id); return nil })
	if !slices.Equal(ids, []string{kept}) {
		t.Fatalf("records after the unstage: %v", ids)
	}
	outs = applyAll(t, sm, []node.Entry{useEntry(t, 7, upload(kept, []byte("kept"))), unstageEntry(t, 8, kept)})
	if r, ok := refuse.As(outs[8].Err); outs[7].Err != nil || !ok || r.Code != refuse.Conflict || !strings.Contains(r.Rule, "was used") {
		t.Fatalf("use, unstage of a used upload: %+v %v", outs[7], outs[8].Err)
	}
}

// A data group's batches scan for expired uploads only while the group
// holds an upload record: none after the last one expired, again from the
// batch that stages a new one, which still expires in its time.
func TestTheUploadScanRunsOnlyWhileUploadsAreHeld(t *testing.T) {
	sm, db := openReplica(t, t.TempDir(), "")
	defer db.Close()
	defer sm.Close()
	g := node.MetaGroup + 1
	records := func() int {
		n := 0
		sm.eachUpload(g, func(string, uploadRecord) error { n++; return nil })
		return n
	}
	first := NewUploadID(start, 3)
	applyAll(t, sm, []node.Entry{chunkEntry(t, 2, first, 0, []byte("abc"))})
	if sm.noUploads[g] {
		t.Fatal("a group staging an upload is taken to hold none")
	}
	late := uint64(UploadMaxAge/time.Second) + 10
	applyAll(t, sm, []node.Entry{chunkEntry(t, late, first, 3, []byte("def"))})
	if !sm.noUploads[g] || records() != 0 {
		t.Fatalf("after the last upload expired: no uploads %v, %d records", sm.noUploads[g], records())
	}
	second := NewUploadID(start.Add(time.Duration(late)*time.Second), 4)
	applyAll(t, sm, []node.Entry{chunkEntry(t, late+1, second, 0, []byte("ghi"))})
	if sm.noUploads[g] || records() != 1 {
		t.Fatalf("after a new upload: no uploads %v, %d records", sm.noUploads[g], records())
	}
	later := 2*late + 20
	applyAll(t, sm, []node.Entry{chunkEntry(t, later, second, 3, []byte("jkl"))})
	if !sm.noUploads[g] || records() != 0 || len(staged(t, sm)) != 0 {
		t.Fatalf("after the new upload expired: no uploads %v, %d records, staged %v", sm.noUploads[g], records(), staged(t, sm))
	}
}
