// tally console: reads one session through the server's REST API and its
// event stream. Every value from the ledger is rendered as text (text nodes
// and textContent; never markup built from data). The token lives in
// sessionStorage and travels only in the Authorization header.
'use strict';

(() => {
  const TOKEN_KEY = 'tally.console.token';
  const $ = (sel, root = document) => root.querySelector(sel);
  const SVGNS = 'http://www.w3.org/2000/svg';

  // ---- DOM helpers: data becomes text nodes, attributes are set one by one.
  function build(ns, tag, attrs, children) {
    const e = ns ? document.createElementNS(ns, tag) : document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') e.setAttribute('class', v);
      else if (k === 'text') e.textContent = String(v);
      else if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }
  const h = (tag, attrs, ...children) => build(null, tag, attrs, children);
  const s = (tag, attrs, ...children) => build(SVGNS, tag, attrs, children);

  // safeURL admits only http(s) links for evidence; anything else is text.
  function safeURL(u) {
    try {
      const url = new URL(u);
      return url.protocol === 'http:' || url.protocol === 'https:' ? url.href : null;
    } catch { return null; }
  }
  function link(u) {
    const href = safeURL(u);
    return href ? h('a', { href, rel: 'noopener noreferrer', target: '_blank' }, u) : h('code', {}, u);
  }

  // ---- time
  let serverSkew = 0; // server now − browser now, from the last answer
  const now = () => Date.now() + serverSkew;
  function dur(ms) {
    ms = Math.abs(ms);
    const m = Math.floor(ms / 60000), hh = Math.floor(m / 60), d = Math.floor(hh / 24);
    if (d >= 2) return d + 'd';
    if (d >= 1) return d + 'd ' + (hh % 24) + 'h';
    if (hh >= 1) return hh + 'h' + (m % 60 ? ' ' + (m % 60) + 'm' : '');
    if (m >= 1) return m + 'm';
    return Math.max(1, Math.floor(ms / 1000)) + 's';
  }
  function fmt(iso) {
    if (!iso) return '—';
    const d = new Date(iso);
    if (isNaN(d)) return String(iso);
    return d.toISOString().replace('T', ' ').replace(/:\d\d(\.\d+)?Z$/, ' UTC');
  }
  function relDue(iso, overdue) {
    if (!iso) return '';
    const diff = new Date(iso).getTime() - now();
    if (overdue) return 'overdue ' + dur(diff);
    return diff >= 0 ? 'due in ' + dur(diff) : 'deadline passed ' + dur(diff) + ' ago';
  }
  function timeEl(iso, label) {
    return h('time', { datetime: iso || '', title: fmt(iso) }, label || fmt(iso));
  }

  // ---- state presentation: a glyph and a word, never colour alone.
  const GLYPH = {
    owed: '○', conditional: '◇', satisfied: '✓', cancelled: '⊘', released: '↺', expired: '⌛',
    open: '○', withdrawn: '⊘', superseded: '⤳', overdue: '⚠', lapsed: '⚠', failed: '✗', violated: '✗',
  };
  const CLAIM_FAILED = new Set(['PostFailed', 'ReceiptFailed', 'TestamentGenerationFailed', 'ValidationIncomplete',
    'ValidationFailed', 'ValidationErrored', 'Expired', 'DependencyFailed', 'Deadlocked']);
  const CLAIM_WITHDRAWN = new Set(['Cancelled', 'Revoked', 'Superseded']);
  function stateClass(family, state) {
    if (family === 'check') return state === 'passed' ? 'ok' : state === 'failed' || state === 'errored' || state === 'incomplete' ? 'bad' : 'open';
    if (family === 'claim') {
      if (state === 'Satisfied') return 'ok';
      if (CLAIM_FAILED.has(state)) return 'bad';
      if (CLAIM_WITHDRAWN.has(state)) return 'off';
      return 'open';
    }
    if (state === 'satisfied') return 'ok';
    if (state === 'cancelled' || state === 'released' || state === 'withdrawn' || state === 'superseded') return 'off';
    if (state === 'expired' || state === 'violated') return 'bad';
    return 'open';
  }
  function glyph(family, state) {
    if (family === 'claim' || family === 'check') {
      const c = stateClass(family, state);
      return c === 'ok' ? '✓' : c === 'bad' ? '✗' : c === 'off' ? '⊘' : '○';
    }
    return GLYPH[state] || '•';
  }
  function badge(family, state, extra) {
    return h('span', { class: 'badge ' + stateClass(family, state), 'data-state': state },
      h('span', { 'aria-hidden': 'true' }, glyph(family, state) + ' '), state, extra ? ' · ' + extra : '');
  }
  function attentionBadge(why, text) {
    return h('span', { class: 'badge warn', 'data-attention': why }, h('span', { 'aria-hidden': 'true' }, '⚠ '), text || why);
  }

  // ---- API
  const auth = { token: sessionStorage.getItem(TOKEN_KEY) || '', insecure: false, actor: 'console', who: '' };
  function headers(extra) {
    const hd = Object.assign({ Accept: 'application/json' }, extra || {});
    if (auth.token) hd.Authorization = 'Bearer ' + auth.token;
    else if (auth.insecure) hd['X-Tally-Actor'] = auth.actor;
    return hd;
  }
  class APIError extends Error {
    constructor(status, msg, code) { super(msg); this.status = status; this.code = code; }
  }
  // replicated: the server is a cluster node (its answers say so), which
  // alone has a cluster view to link.
  let replicated = false;
  async function api(path, opts) {
    const r = await fetch(path, Object.assign({ headers: headers(), cache: 'no-store' }, opts || {}));
    if (r.headers.get('Tally-Replicated') === 'true') replicated = true; // a cluster node answers
    let body = null;
    try { body = await r.json(); } catch { /* not JSON */ }
    if (!r.ok) throw new APIError(r.status, (body && body.error) || r.status + ' ' + r.statusText, body && body.code);
    if (body && body.now) serverSkew = new Date(body.now).getTime() - Date.now();
    return body;
  }
  // requestID is a fresh Idempotency-Key, so a retried click records once.
  function requestID() {
    const b = new Uint8Array(12);
    crypto.getRandomValues(b);
    return 'console-' + [...b].map((x) => x.toString(16).padStart(2, '0')).join('');
  }
  // post is a write through the same API; a refusal's text is the error.
  async function post(path, body) {
    const r = await fetch(path, { method: 'POST', cache: 'no-store', body: JSON.stringify(body),
      headers: headers({ 'Content-Type': 'application/json', 'Idempotency-Key': requestID() }) });
    let doc = null;
    try { doc = await r.json(); } catch { /* not JSON */ }
    if (!r.ok) throw new APIError(r.status, (doc && doc.error) || r.status + ' ' + r.statusText, doc && doc.code);
    return doc;
  }
  const enc = encodeURIComponent;
  let ctx = null; // {tenant, session, base}
  const sp = (p) => ctx.base + p;

  // ---- routing: #/ (sign-in, sessions), #/T/S/view[/id][?query]
  function route() {
    const raw = location.hash.replace(/^#/, '') || '/';
    const [pathPart, query] = raw.split('?');
    const parts = pathPart.split('/').filter(Boolean).map(decodeURIComponent);
    return { parts, query: new URLSearchParams(query || '') };
  }
  function href(view, id, query) {
    let p = '#/' + enc(ctx.tenant) + '/' + enc(ctx.session) + '/' + view;
    if (id !== undefined) p += '/' + enc(id);
    if (query) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(query)) if (v) q.set(k, v);
      const qs = q.toString();
      if (qs) p += '?' + qs;
    }
    return p;
  }
  const main = () => $('#main');
  let renderSeq = 0; // drops answers of views the person has left
  let refresh = null; // re-renders the current view in place on new records

  function setView(title, ...nodes) {
    const m = main();
    m.replaceChildren(...nodes.flat(Infinity).filter((n) => n !== null && n !== undefined && n !== false));
    document.title = title + ' · tally console';
  }
  function errorBox(err) {
    return h('div', { class: 'error', role: 'alert' }, h('strong', {}, 'The server refused: '), err.message);
  }

  async function render() {
    const my = ++renderSeq;
    const { parts, query } = route();
    refresh = null;
    if (parts[0] === 'cluster') { ctx = null; stopStream(); return renderCluster(my); }
    if (parts.length < 2) { ctx = null; stopStream(); return renderStart(my); }
    const [tenant, session, view = 'overview', id] = parts;
    if (!ctx || ctx.tenant !== tenant || ctx.session !== session) {
      ctx = { tenant, session, base: '/v1/tenants/' + enc(tenant) + '/sessions/' + enc(session) };
      startStream();
    }
    if (!auth.who) {
      try { auth.who = (await api('/v1/tenants')).actor; } catch { /* the view's own request reports it */ }
      if (my !== renderSeq) return;
    }
    $('#where').textContent = tenant + ' / ' + session;
    const tabs = $('#tabs');
    tabs.hidden = false;
    for (const a of tabs.querySelectorAll('a')) {
      a.setAttribute('href', href(a.dataset.view));
      if (a.dataset.view === view) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
    }
    const views = { overview, obligations, promise: promiseView, claim: claimView, graph: graphView, expectations };
    const fn = views[view];
    if (!fn) return setView('Not found', errorBox(new Error('no view ' + view)));
    let drawn = 0; // the latest draw wins, whichever answer comes back first
    const draw = async (first) => {
      const mine = ++drawn;
      const t0 = performance.now();
      try {
        const nodes = await fn(id, query, first);
        if (my !== renderSeq || mine !== drawn || !nodes) return;
        const focus = document.activeElement && document.activeElement.id;
        setView(nodes.title, ...nodes.body);
        if (focus && document.getElementById(focus)) document.getElementById(focus).focus();
        if (first && nodes.after) nodes.after();
      } catch (err) {
        if (my !== renderSeq || mine !== drawn) return;
        if (err.status === 401) return signOut('Your token was refused: ' + err.message);
        setView('Error', errorBox(err));
      } finally {
        drawCost = performance.now() - t0;
      }
    };
    // A live redraw waits while someone is typing in a field of the view,
    // so it never takes their input away.
    refresh = () => {
      const a = document.activeElement;
      if (a && main().contains(a) && /^(INPUT|SELECT|TEXTAREA)$/.test(a.tagName)) { changed(1000); return; }
      draw(false);
    };
    await draw(true);
    if (view === 'overview') performance.mark('tally:overview');
  }

  // ---- sign-in and sessions
  async function renderStart(my) {
    $('#tabs').hidden = true;
    $('#where').textContent = '';
    if (!auth.token) {
      try {
        const cfg = await (await fetch('/console/config.json', { cache: 'no-store' })).json();
        auth.insecure = !!cfg.insecure;
      } catch { auth.insecure = false; }
    }
    if (my !== renderSeq) return;
    if (!auth.token && !auth.insecure) return setView('Sign in', signInForm());
    try {
      const who = await api('/v1/tenants');
      auth.who = who.actor;
      $('#signout').hidden = !auth.token;
      const lists = [];
      for (const t of who.tenants) {
        const ss = await api('/v1/tenants/' + enc(t) + '/sessions');
        lists.push(h('section', { class: 'card' }, h('h2', {}, 'Tenant ', h('code', {}, t)),
          ss.sessions.length === 0 ? h('p', {}, 'No sessions with records yet.') :
            h('ul', { class: 'sessions' }, ss.sessions.map((x) =>
              h('li', {}, h('a', { href: '#/' + enc(t) + '/' + enc(x.session) + '/overview' }, x.session),
                h('span', { class: 'muted' }, ' · ', kb(x.bytes)))))));
      }
      let cluster = null;
      if (replicated) try { await api('/v1/cluster/status'); cluster = h('p', {}, h('a', { href: '#/cluster' }, 'The cluster'), ': nodes, groups and what is being moved'); } catch { /* not a cluster node, or not its operator */ }
      if (my !== renderSeq) return;
      setView('Sessions', h('h1', {}, 'Sessions'), cluster,
        h('p', {}, 'Signed in as ', h('code', {}, who.actor), ' (', who.role, ')', auth.insecure && !auth.token ? ' — --insecure-dev, no token needed' : ''),
        lists);
    } catch (err) {
      if (err.status === 401) return signOut('Your token was refused: ' + err.message);
      setView('Error', errorBox(err));
    }
  }
  // ---- the cluster (#/cluster): nodes by zone, each group's voters and
  // leader, what is being moved; redrawn every 2 s while shown. The status
  // is its operator's (a token of tenant "*", role admin).
  async function renderCluster(my) {
    $('#tabs').hidden = true;
    $('#where').textContent = 'cluster';
    let st;
    try {
      st = await api('/v1/cluster/status');
    } catch (err) {
      if (my !== renderSeq) return;
      if (err.status === 401) return signOut('Your token was refused: ' + err.message);
      return setView('Cluster', h('h1', {}, 'Cluster'), errorBox(err));
    }
    // The members' liveness as this node sees it (the failure detector's
    // states, incarnations, health); the placement's state is the meta
    // group's settled facts only.
    let live = {};
    try {
      for (const m of (await api('/v1/cluster/members')).members) live[m.id] = m;
    } catch { live = {}; }
    if (my !== renderSeq) return;
    const p = st.placement;
    const leads = {};
    for (const g of st.groups) leads[g.leader] = (leads[g.leader] || 0) + 1;
    const stateOf = (id) => p.dead.includes(id) ? 'dead' : p.draining.includes(id) ? 'draining' : 'alive';
    const zones = {};
    for (const m of st.members) (zones[m.zone || '(unlabelled)'] ||= []).push(m);
    const leaderOf = {};
    for (const g of st.groups) leaderOf[g.group] = g.leader;
    const nodeRef = (v) => h('span', { class: 'cnode ' + stateOf(v.id), title: 'zone ' + (v.zone || '(unlabelled)') + (v.region ? ', region ' + v.region : '') },
      'n' + v.id, h('span', { class: 'muted' }, '·' + (v.zone || '?')));
    const refs = (vs, leader) => vs.length === 0 ? '–' : vs.map((v, i) => [i ? ' ' : '', v.id === leader ? h('strong', {}, nodeRef(v), '★') : nodeRef(v)]);
    const flying = p.decisions.filter((d) => d.state === 'in-flight');
    setView('Cluster',
      h('h1', {}, 'Cluster ', h('code', {}, st.cluster_id)),
      h('p', {}, 'Seen from node ', st.node_id, ' · replicas ', p.replicas || 'every member (none configured)', ' · ', p.tolerance),
      h('section', { class: 'card', 'aria-labelledby': 'h-zones' }, h('h2', { id: 'h-zones' }, 'Nodes by zone'),
        h('table', {}, h('thead', {}, h('tr', {}, ['Zone', 'Node', 'Region', 'Address', 'State', 'Liveness', 'Incarnation', 'Health', 'Leads'].map((c) => h('th', { scope: 'col' }, c)))),
          h('tbody', {}, Object.entries(zones).sort().map(([z, ms]) => ms.map((m, i) =>
            h('tr', { 'data-node': m.id }, h('td', {}, i ? '' : z), h('td', {}, 'n' + m.id), h('td', {}, m.region || ''), h('td', {}, h('code', {}, m.addr)),
              h('td', {}, stateOf(m.id)),
              h('td', { 'data-liveness': m.id, class: 'live ' + (live[m.id] ? live[m.id].state : '') }, live[m.id] ? live[m.id].state : '?'),
              h('td', { class: 'n' }, live[m.id] ? live[m.id].incarnation : ''),
              h('td', { class: 'n', title: 'health score 0 (healthy) to 8' }, live[m.id] ? live[m.id].health_score : ''),
              h('td', { class: 'n' }, leads[m.id] || 0))))))),
      h('section', { class: 'card', 'aria-labelledby': 'h-groups' }, h('h2', { id: 'h-groups' }, 'Groups'),
        h('table', {}, h('thead', {}, h('tr', {}, ['Group', 'Voters (★ leader)', 'Learners', 'Goal', 'Epoch', 'Moving', 'Survives'].map((c) => h('th', { scope: 'col' }, c)))),
          h('tbody', {}, p.groups.map((g) => h('tr', { 'data-group': g.group },
            h('td', {}, g.group === 1 ? '1 (meta)' : g.group), h('td', {}, refs(g.voters, leaderOf[g.group])), h('td', {}, refs(g.learners)),
            h('td', { class: 'n' }, g.goal), h('td', { class: 'n' }, g.epoch),
            h('td', {}, g.in_flight ? g.in_flight.op + ' n' + g.in_flight.node + ': ' + g.in_flight.reason : g.short || ''),
            h('td', {}, g.tolerance.summary)))))),
      h('section', { class: 'card', 'aria-labelledby': 'h-moves' }, h('h2', { id: 'h-moves' }, 'Being moved'),
        flying.length === 0 ? h('p', {}, 'Nothing in flight.') :
          h('ul', {}, flying.map((d) => h('li', {}, 'group ', d.group, ': ', d.op, ' node ', d.node, ' — ', d.reason))),
        h('h3', {}, 'Recent decisions'),
        h('ol', { reversed: true }, p.decisions.slice(-10).reverse().map((d) =>
          h('li', {}, 'group ', d.group, ' ', d.op, ' n', d.node, ' ', h('span', { class: 'muted' }, d.state), ' — ', d.reason, d.error ? ' (' + d.error + ')' : ''))),
        h('h3', {}, 'Sessions moving between groups'),
        (st.moves || []).length === 0 ? h('p', {}, 'No session moves.') :
          h('ol', { reversed: true }, st.moves.slice(-10).reverse().map((m) =>
            h('li', { 'data-move': m.id }, m.tenant + '/' + m.session, ': group ', m.from, ' → ', m.to, ' ', h('strong', {}, m.step),
              ' · ', Math.max(m.bytes || 0, m.length || 0), ' bytes', m.reason ? ' — ' + m.reason : '')))),
      h('p', { class: 'muted' }, 'Redrawn every 2 s.'));
    setTimeout(() => { if (my === renderSeq) renderCluster(my); }, 2000);
  }

  const kb = (n) => n < 1024 ? n + ' B' : n < 1 << 20 ? (n / 1024).toFixed(1) + ' KiB' : (n / (1 << 20)).toFixed(1) + ' MiB';

  function signInForm(msg) {
    const input = h('input', { id: 'token', type: 'password', autocomplete: 'off', spellcheck: 'false', required: true, 'aria-describedby': 'token-help' });
    const form = h('form', { class: 'card signin', onsubmit: (e) => {
      e.preventDefault();
      auth.token = input.value.trim();
      if (!auth.token) return;
      sessionStorage.setItem(TOKEN_KEY, auth.token);
      $('#signout').hidden = false;
      render();
    } },
    h('h1', {}, 'Sign in'),
    msg ? h('p', { class: 'error', role: 'alert' }, msg) : null,
    h('label', { for: 'token' }, 'Bearer token'), input,
    h('p', { id: 'token-help', class: 'muted' }, 'Made with ', h('code', {}, 'tally token create'),
      '. It is kept in this tab only (sessionStorage) and sent as an Authorization header, never in a URL.'),
    h('button', { type: 'submit' }, 'Sign in'));
    return form;
  }
  function signOut(msg) {
    sessionStorage.removeItem(TOKEN_KEY);
    auth.token = '';
    stopStream();
    ctx = null;
    $('#signout').hidden = true;
    $('#tabs').hidden = true;
    if (msg) return setView('Sign in', signInForm(msg));
    location.hash = '#/';
    render();
  }

  // ---- overview
  async function overview() {
    const sum = await api(sp('/summary'));
    const fam = (name, key, c) => h('section', { class: 'card counts', 'aria-labelledby': 'h-' + key },
      h('h2', { id: 'h-' + key }, name, ' ', h('span', { class: 'num', 'data-count': key + '.total' }, c.total)),
      c.attention ? h('p', {}, attentionBadge(key === 'expectations' ? 'lapsed' : key === 'claims' ? 'failed' : 'overdue',
        c.attention + (key === 'expectations' ? ' lapsed' : key === 'claims' ? ' failed or overdue' : ' overdue'))) : null,
      h('table', {}, h('caption', { class: 'sr' }, name + ' by state'),
        h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'State'), h('th', { scope: 'col', class: 'n' }, 'Count'))),
        h('tbody', {}, Object.entries(c.by_state).sort((a, b) => b[1] - a[1]).map(([st, n]) =>
          h('tr', {}, h('td', {}, h('a', { href: href('obligations', undefined, { family: key.replace(/s$/, ''), state: st }) },
            badge(key === 'claims' ? 'claim' : key, st))),
          h('td', { class: 'n', 'data-count': key + '.' + st }, n))))),
      c.lapses && Object.keys(c.lapses).length ? h('p', {}, 'Lapses by kind: ',
        Object.entries(c.lapses).map(([k, n], i) => [i ? ', ' : '', h('span', { 'data-count': 'lapses.' + k }, k + ' ' + n)])) : null);
    return {
      title: 'Overview',
      body: [
        h('h1', {}, 'Overview'),
        h('section', { class: 'card attention', 'aria-labelledby': 'h-att' },
          h('h2', { id: 'h-att' }, 'Needs attention first'),
          sum.attention.length === 0 ? h('p', {}, 'Nothing overdue, lapsed or failed.') :
            rowsTable(sum.attention, 'Items needing attention', dismissButton)),
        h('div', { class: 'grid3' }, fam('Promises', 'promises', sum.promises), fam('Claims', 'claims', sum.claims),
          fam('Expectations', 'expectations', sum.expectations)),
        h('p', { class: 'muted' }, 'As of ', timeEl(sum.now), ' · record ', h('span', { 'data-seq': '' }, sum.seq)),
      ],
    };
  }

  function detailHref(o) {
    if (o.family === 'expectation') return href('expectations', undefined, { subject: o.to, focus: o.id });
    return href(o.family, o.id);
  }
  function dueCell(o) {
    // An ended item is done, or ended at a time: a countdown would mislead.
    if (o.ended) {
      const word = o.state === 'satisfied' || o.state === 'Satisfied' ? 'done' : 'ended';
      return h('span', { 'data-due': 'ended' }, o.ended_at ? [word + ' ', timeEl(o.ended_at)] : word);
    }
    if (!o.due) return '—';
    const overdue = o.attention === 'overdue' || (o.attention === 'lapsed' && o.state === 'open');
    return h('span', {}, timeEl(o.due, relDue(o.due, o.attention === 'overdue')), overdue && o.attention === 'lapsed' ? ' (lapsed)' : '');
  }
  function rowsTable(rows, caption, dismiss) {
    const cols = ['Family', 'Id', 'What', 'State', 'Owed by', 'Owed to / subject', 'Due'];
    if (dismiss) cols.push('Dismiss');
    return h('div', { class: 'tablewrap' }, h('table', { class: 'rows' },
      h('caption', { class: 'sr' }, caption),
      h('thead', {}, h('tr', {}, cols.map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, rows.map((o) => h('tr', { class: o.attention ? 'attn' : '', 'data-id': o.id },
        h('td', { 'data-label': 'Family' }, o.family),
        h('td', { 'data-label': 'Id' }, h('a', { href: detailHref(o) }, o.id)),
        h('td', { 'data-label': 'What', class: 'text' }, o.text),
        h('td', { 'data-label': 'State' }, badge(o.family, o.state), o.attention ? [' ', attentionBadge(o.attention)] : null),
        h('td', { 'data-label': 'Owed by' }, o.by),
        h('td', { 'data-label': 'Owed to' }, o.to),
        h('td', { 'data-label': 'Due' }, dueCell(o)),
        dismiss ? h('td', { 'data-label': 'Dismiss' }, dismiss(o)) : null)))));
  }
  // dismissButton records, as the signed-in participant, that it dismissed
  // an item from the attention list: a fact attention.dismissed:FAMILY:ID
  // in the log (the server leaves such items out), never browser storage.
  function dismissButton(o) {
    const b = h('button', { type: 'button', class: 'dismiss', 'aria-label': 'Dismiss ' + o.family + ' ' + o.id + ' from the attention list' }, 'Dismiss');
    b.addEventListener('click', async () => {
      b.disabled = true;
      try {
        await post(sp('/facts'), { factKey: 'attention.dismissed:' + o.family + ':' + o.id, subject: { type: 'attention', id: o.family + ':' + o.id } });
        changed(0);
      } catch (err) {
        b.disabled = false;
        b.replaceWith(h('span', { class: 'error', role: 'status' }, 'Refused: ' + err.message));
      }
    });
    return b;
  }

  // ---- obligations table: filtered and paged on the server
  const PAGE = 100;
  async function obligations(_id, query, first) {
    const q = {};
    for (const k of ['family', 'state', 'by', 'to', 'party', 'q', 'attention', 'offset']) if (query.get(k)) q[k] = query.get(k);
    const offset = Number(q.offset || 0);
    const params = new URLSearchParams(Object.assign({}, q, { offset: String(offset), limit: String(PAGE) }));
    const page = await api(sp('/obligations?' + params));
    const field = (name, label, attrs) => h('div', { class: 'field' }, h('label', { for: 'f-' + name }, label),
      h(attrs && attrs.tag || 'input', Object.assign({ id: 'f-' + name, name, value: q[name] || '' }, attrs && attrs.a || {}),
        attrs && attrs.options ? attrs.options.map(([v, t]) => h('option', { value: v, selected: (q[name] || '') === v }, t)) : null));
    let timer = 0;
    const form = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter obligations', onsubmit: (e) => { e.preventDefault(); apply(); },
      oninput: () => { clearTimeout(timer); timer = setTimeout(apply, 300); } },
    field('family', 'Family', { tag: 'select', options: [['', 'all'], ['promise', 'promises'], ['claim', 'claims'], ['expectation', 'expectations']] }),
    field('state', 'State', { a: { list: 'states', placeholder: 'any' } }),
    field('by', 'Owed by', { a: { placeholder: 'debtor' } }),
    field('to', 'Owed to', { a: { placeholder: 'creditor' } }),
    field('party', 'Participant', { a: { placeholder: 'either side' } }),
    field('q', 'Text or id', { a: { type: 'search', placeholder: 'contains…' } }),
    h('div', { class: 'field check' }, h('input', { type: 'checkbox', id: 'f-attention', name: 'attention', value: 'true', checked: q.attention === 'true' }),
      h('label', { for: 'f-attention' }, 'Needs attention only')),
    h('datalist', { id: 'states' }, ['owed', 'conditional', 'satisfied', 'cancelled', 'released', 'expired', 'open', 'withdrawn', 'superseded',
      'Generated', 'Posted', 'Received', 'Validating', 'Satisfied', 'ValidationFailed', 'Expired'].map((v) => h('option', { value: v }))),
    h('button', { type: 'submit' }, 'Filter'));
    function apply() {
      const fd = new FormData(form);
      const nq = {};
      for (const [k, v] of fd.entries()) if (v) nq[k] = String(v);
      history.replaceState(null, '', href('obligations', undefined, nq));
      render();
    }
    const last = Math.min(offset + page.rows.length, page.total);
    const nav = h('nav', { class: 'pager', 'aria-label': 'Pages' },
      h('a', { href: offset > 0 ? href('obligations', undefined, Object.assign({}, q, { offset: String(Math.max(0, offset - PAGE)) })) : null, 'aria-disabled': offset === 0 ? 'true' : null }, '← Previous'),
      h('span', { 'data-total': page.total }, page.total === 0 ? 'No rows' : `Rows ${offset + 1}–${last} of ${page.total}`),
      h('a', { href: last < page.total ? href('obligations', undefined, Object.assign({}, q, { offset: String(offset + PAGE) })) : null, 'aria-disabled': last >= page.total ? 'true' : null }, 'Next →'));
    void first;
    return { title: 'Obligations', body: [h('h1', {}, 'Obligations'), form, nav, rowsTable(page.rows, 'Obligations'), nav.cloneNode(true)] };
  }

  // ---- promise detail
  async function promiseView(id) {
    const [doc, hist] = await Promise.all([api(sp('/promises/' + enc(id))), api(sp('/promises/' + enc(id) + '/history'))]);
    const p = doc.promise;
    const until = new Date(p.until).getTime();
    const resolvedAt = p.resolved_at ? new Date(p.resolved_at).getTime() : 0;
    const lateness = resolvedAt && resolvedAt > until ? dur(resolvedAt - until) + ' after the deadline' : resolvedAt ? 'before the deadline' : '';
    const ledger = h('section', { class: 'card col', 'aria-labelledby': 'h-ledger', 'data-record': 'ledger' },
      h('h2', { id: 'h-ledger' }, 'The ledger’s record'),
      h('p', { class: 'muted' }, 'Computed from the log: what the debtor and creditor recorded.'),
      h('dl', {},
        h('dt', {}, 'State'), h('dd', {}, badge('promise', p.state), p.overdue ? [' ', attentionBadge('overdue', relDue(p.until, true))] : null),
        p.resolved_at ? [h('dt', {}, 'Resolved'), h('dd', { 'data-field': 'resolved' }, p.state, ' by ', h('code', {}, p.resolved_by), ' at ', timeEl(p.resolved_at), lateness ? ' — ' + lateness : '')] : null,
        p.evidence.length ? [h('dt', {}, 'Evidence'), h('dd', {}, h('ul', {}, p.evidence.map((e) => h('li', {}, link(e)))))] : null,
        p.reason ? [h('dt', {}, 'Reason'), h('dd', {}, p.reason)] : null));
    const judged = h('section', { class: 'card col', 'aria-labelledby': 'h-assess', 'data-record': 'assessments' },
      h('h2', { id: 'h-assess' }, 'Observers’ assessments'),
      h('p', { class: 'muted' }, 'Signed judgments beside the promise; they never change its state.'),
      p.assessments.length === 0 ? h('p', {}, 'No observer has assessed this promise.') :
        h('ul', { class: 'plain' }, p.assessments.map((a) => h('li', { class: 'assess' },
          h('p', {}, badge('promise', a.state), ' by ', h('code', {}, a.observer)),
          h('p', {}, 'at ', timeEl(a.ts), resolvedAt && new Date(a.ts).getTime() < resolvedAt ? ' — before the resolution' : ''),
          a.note ? h('blockquote', {}, a.note) : null))));
    const both = p.assessments.length > 0 && p.resolved_at ?
      h('p', { class: 'both', role: 'note' }, h('strong', {}, 'Two records, both true. '), bothSentence(p, lateness),
        ' They are shown side by side, never merged into one verdict.') : null;
    return {
      title: 'Promise ' + p.id,
      body: [
        h('p', { class: 'crumbs' }, h('a', { href: href('obligations', undefined, { family: 'promise' }) }, 'Promises'), ' / ', p.id),
        h('h1', {}, 'Promise ', h('code', {}, p.id)),
        h('p', { class: 'lead' }, p.promise),
        h('p', {}, h('code', {}, p.by), ' owes ', h('code', {}, p.to), ' · deadline ', timeEl(p.until),
          p.on ? [' · waits on ', h('a', { href: href('promise', p.on) }, p.on)] : null, p.task ? [' · task ', h('code', {}, p.task)] : null,
          ' · declared ', timeEl(p.declared)),
        both,
        h('div', { class: 'two' }, ledger, judged),
        promiseActions(p),
        h('section', { class: 'card', 'aria-labelledby': 'h-time' }, h('h2', { id: 'h-time' }, 'Timeline'),
          h('div', { class: 'svgwrap' }, timeline(p, hist.steps, doc.now)), historyList(hist.steps)),
      ],
    };
  }

  // promiseActions offers what a participant may do to an open promise: a
  // creditor releases it, anyone records a judgment as itself. The server
  // decides; a refusal is shown in its own words.
  // bothSentence says who recorded the resolution and who judged the
  // promise, each once and by their part in it: "bob (the debtor) recorded
  // satisfied 2h after the deadline; alice (the creditor) judged it violated."
  function bothSentence(p, lateness) {
    const part = (who) => who === p.by ? who + ' (the debtor)' : who === p.to ? who + ' (the creditor)' : who + ' (an observer)';
    const list = (xs) => xs.length < 2 ? xs.join('') : xs.slice(0, -1).join(', ') + ' and ' + xs[xs.length - 1];
    const uniq = (xs) => xs.filter((x, i) => xs.indexOf(x) === i);
    const judges = uniq(p.assessments.map((a) => a.observer)).map(part);
    const states = uniq(p.assessments.map((a) => a.state));
    return part(p.resolved_by) + ' recorded ' + p.state + (lateness ? ' ' + lateness : '') + '; ' +
      list(judges) + ' judged it ' + states.join(' or ') + '.';
  }

  function promiseActions(p) {
    if (p.state !== 'owed' && p.state !== 'conditional') return null;
    const out = h('p', { id: 'act-out', role: 'status', 'aria-live': 'polite' });
    const note = h('input', { id: 'act-note', name: 'note', placeholder: 'why (optional)' });
    const act = async (label, path, body) => {
      out.className = ''; out.textContent = label + '…';
      try {
        await post(sp('/promises/' + enc(p.id) + path), body);
        out.textContent = label + ': recorded.';
        changed(0);
      } catch (err) {
        out.className = 'error';
        out.textContent = 'Refused: ' + err.message;
      }
    };
    return h('section', { class: 'card actions', 'aria-labelledby': 'h-act' },
      h('h2', { id: 'h-act' }, 'Act as ', h('code', {}, auth.who || 'yourself')),
      h('p', { class: 'muted' }, 'Only the creditor may release a promise; any participant may record its own judgment beside it. The ledger checks.'),
      h('div', { class: 'filters' },
        h('div', { class: 'field' }, h('label', { for: 'act-note' }, 'Note or reason'), note),
        h('button', { type: 'button', id: 'act-release', onclick: () => act('Release', '/resolve', { as: 'released', reason: note.value || undefined }) }, 'Release (creditor)'),
        h('button', { type: 'button', id: 'act-assess', onclick: () => act('Judgment', '/assess', { state: 'violated', note: note.value || undefined }) }, 'Judge it violated')),
      out);
  }

  // timeline draws the promise's records and deadlines on one axis, with now.
  function timeline(p, steps, nowISO) {
    const marks = [];
    for (const st of steps) {
      const r = st.record;
      const t = new Date(r.ts).getTime();
      if (r.type === 'promise') marks.push({ t, kind: 'declared', label: 'declared' });
      if (r.type === 'amend') marks.push({ t, kind: 'amend', label: 'amended' + (r.reason ? ': ' + r.reason : '') });
      if (r.type === 'assess') marks.push({ t, kind: 'assess', label: 'judged ' + r.state });
      if (r.type === 'resolve') marks.push({ t, kind: 'resolve', label: r.as });
    }
    p.horizons.forEach((u, i) => marks.push({ t: new Date(u).getTime(), kind: 'deadline', label: 'deadline ' + (i + 1) + (i === p.horizons.length - 1 ? ' (in force)' : '') }));
    const nt = new Date(nowISO).getTime();
    const ts = marks.map((m) => m.t);
    let lo = Math.min(...ts), hi = Math.max(...ts);
    const showNow = nt - hi < (hi - lo) * 0.5 + 864e5;
    if (showNow) hi = Math.max(hi, nt);
    if (hi === lo) hi = lo + 36e5;
    const W = 1000, H = 40 + marks.length * 18, x0 = 20, x1 = W - 20;
    const x = (t) => x0 + (t - lo) / (hi - lo) * (x1 - x0);
    marks.sort((a, b) => a.t - b.t);
    const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, class: 'timeline', role: 'img', 'aria-label': 'Timeline of the promise: ' + marks.map((m) => m.label + ' ' + fmt(new Date(m.t).toISOString())).join('; ') },
      s('line', { x1: x0, y1: 20, x2: x1, y2: 20, class: 'axis' }),
      marks.map((m, i) => {
        const y = 36 + i * 18, xx = x(m.t);
        const anchor = xx > W * 0.6 ? 'end' : 'start';
        return s('g', { class: 'mark ' + m.kind },
          s('line', { x1: xx, y1: 14, x2: xx, y2: y - 4, class: 'tick' }),
          m.kind === 'deadline' ? s('rect', { x: xx - 4, y: 16, width: 8, height: 8 }) : s('circle', { cx: xx, cy: 20, r: 4 }),
          s('text', { x: anchor === 'end' ? xx - 4 : xx + 4, y, 'text-anchor': anchor }, m.label + ' · ' + fmt(new Date(m.t).toISOString())));
      }),
      showNow ? s('g', { class: 'mark now' }, s('line', { x1: x(nt), y1: 6, x2: x(nt), y2: H - 4 }), s('text', { x: x(nt) - 4, y: 12, 'text-anchor': 'end' }, 'now')) : null);
    return svg;
  }
  function historyList(steps) {
    return h('ol', { class: 'history' }, steps.map((st) => {
      const r = st.record;
      const what = r.type === 'promise' ? 'declared, deadline ' + fmt(r.until) :
        r.type === 'amend' ? 'deadline moved to ' + fmt(r.until) + (r.reason ? ' — “' + r.reason + '”' : '') :
          r.type === 'assess' ? (r.observer || '') + ' judged it ' + r.state + (r.note ? ' — “' + r.note + '”' : '') :
            r.type === 'resolve' ? r.as + ' by ' + (r.by || '') + (r.reason ? ' — ' + r.reason : '') : r.type;
      return h('li', {}, timeEl(r.ts), ' ', what, ' → ', badge('promise', st.state));
    }));
  }

  // ---- claim detail
  async function claimView(id) {
    const [doc, hist, graph] = await Promise.all([api(sp('/claims/' + enc(id))), api(sp('/claims/' + enc(id) + '/history')), api(sp('/claim-graph'))]);
    const c = doc.claim;
    return {
      title: 'Claim ' + c.claim,
      body: [
        h('p', { class: 'crumbs' }, h('a', { href: href('obligations', undefined, { family: 'claim' }) }, 'Claims'), ' / ', c.claim),
        h('h1', {}, 'Claim ', h('code', {}, c.claim), ' ', badge('claim', c.state, c.overdue ? 'overdue' : '')),
        h('p', { class: 'lead' }, c.work),
        h('p', {}, 'Claimant ', h('code', {}, c.claimant), ' · respondent ', h('code', {}, c.respondent),
          c.receipt && c.receipt.holder ? [' · receipt held by ', h('code', {}, c.receipt.holder), ' (generation ', c.receipt.generation, ')'] : null,
          c.scope ? [' · scope: ', c.scope] : null, c.deadline ? [' · deadline ', timeEl(c.deadline)] : null),
        whyBox(c),
        stepper(c.claim, hist.steps),
        matrix(c),
        testaments(c),
        artifacts(c, doc.custody),
        chain(c, graph),
      ],
    };
  }

  // whyBox is the claim's own explanation: the why member when the server
  // gives one, else what the view says about its end and its slots.
  function whyBox(c) {
    const body = [];
    if (Array.isArray(c.why) && c.why.length) {
      body.push(h('ul', { class: 'why-list' }, c.why.map((w) => w && typeof w === 'object' && 'text' in w ?
        h('li', { 'data-why': w.kind || '' }, h('span', { class: 'kind' }, w.kind || ''), ' ', w.text,
          w.chain ? [' ', h('span', { class: 'cyc' }, '↻ cycle: ', w.chain.concat(w.chain.slice(0, 1)).join(' → '))] : null) :
        h('li', {}, explain(w)))));
    } else if (c.why !== undefined && c.why !== null && !(Array.isArray(c.why))) body.push(explain(c.why));
    else {
      if (c.terminal) body.push(h('p', {}, badge('claim', c.terminal.state), ' ', c.terminal.reason));
      for (const sl of c.slots || []) {
        const causes = (sl.causes || []).map((x) => x.state + (x.check ? ' (' + x.check + ' on ' + x.artifact + ')' : ''));
        body.push(h('p', {}, 'Slot ', h('code', {}, sl.name), ': ', sl.status, sl.witness ? ' — witness ' + sl.witness.artifact : '', causes.length ? ' — ' + causes.join('; ') : ''));
      }
      for (const r of c.relations || []) body.push(h('p', {}, r.relation.replace('_', ' '), ' ', h('code', {}, r.claim), ': ', r.state || '', r.blocking && !r.holds ? ' (blocks acceptance)' : ''));
    }
    return h('section', { class: 'card why', 'aria-labelledby': 'h-why' }, h('h2', { id: 'h-why' }, 'Why it is ', c.state), body);
  }
  // explain renders any JSON value as text: strings as paragraphs, arrays as
  // lists, objects as term/definition pairs.
  function explain(v) {
    if (v === null || typeof v !== 'object') return h('p', {}, String(v));
    if (Array.isArray(v)) return h('ul', {}, v.map((x) => h('li', {}, explain(x))));
    return h('dl', { class: 'explain' }, Object.entries(v).map(([k, x]) => [h('dt', {}, k), h('dd', {}, explain(x))]));
  }

  function recordSummary(r) {
    const bits = [];
    for (const k of ['holder', 'generation', 'artifact', 'slot', 'kind', 'testament', 'outcome', 'summary', 'check', 'result', 'attempt', 'note', 'reason', 'predecessor', 'successor']) {
      if (r[k] !== undefined && r[k] !== null && r[k] !== '') bits.push(k + ' ' + (k === 'digest' ? String(r[k]).slice(0, 12) : r[k]));
    }
    if (r.digest) bits.push('digest ' + String(r.digest).slice(0, 12));
    return bits.join(' · ');
  }
  const stepAt = new Map(); // claim → the step shown, kept across live redraws
  function stepper(claimID, steps) {
    let i = Math.min(stepAt.has(claimID) ? stepAt.get(claimID) : steps.length - 1, steps.length - 1);
    const pos = h('span', { id: 'step-pos' });
    const cur = h('div', { class: 'step-current', 'aria-live': 'polite', id: 'step-current' });
    const list = h('ol', { class: 'steps' });
    const prev = h('button', { type: 'button', id: 'step-prev', onclick: () => go(i - 1) }, '◀ Previous');
    const next = h('button', { type: 'button', id: 'step-next', onclick: () => go(i + 1) }, 'Next ▶');
    const firstB = h('button', { type: 'button', id: 'step-first', onclick: () => go(0) }, '« First');
    const lastB = h('button', { type: 'button', id: 'step-last', onclick: () => go(steps.length - 1) }, 'Last »');
    steps.forEach((st, k) => list.append(h('li', { 'data-step': k },
      h('button', { type: 'button', class: 'linkish', onclick: () => go(k) }, st.type.replace(/^claim\./, '')), ' → ',
      h('span', { class: 'after', 'data-state-after': st.state }, st.state))));
    function go(k) {
      i = Math.max(0, Math.min(steps.length - 1, k));
      stepAt.set(claimID, i);
      const st = steps[i];
      const r = st.record;
      pos.textContent = `Step ${i + 1} of ${steps.length}`;
      cur.replaceChildren(
        h('p', {}, h('strong', {}, st.type), ' by ', h('code', {}, st.actor || r.claimant || r.holder || ''), ' at ', timeEl(r.ts), ' · record ', st.seq, st.via ? ' (about ' + st.via + ')' : ''),
        h('p', {}, recordSummary(r)),
        h('p', { class: 'state-after' }, 'State after this step: ', badge('claim', st.state)));
      for (const li of list.children) {
        if (Number(li.dataset.step) === i) li.setAttribute('aria-current', 'step'); else li.removeAttribute('aria-current');
      }
      prev.disabled = i === 0; firstB.disabled = i === 0;
      next.disabled = i === steps.length - 1; lastB.disabled = i === steps.length - 1;
    }
    go(i);
    return h('section', { class: 'card', 'aria-labelledby': 'h-steps' }, h('h2', { id: 'h-steps' }, 'Lifecycle, record by record'),
      h('div', { class: 'stepbar', role: 'group', 'aria-label': 'Step through the lifecycle' }, firstB, prev, pos, next, lastB),
      cur, h('details', {}, h('summary', {}, 'Every step'), list));
  }
  function matrix(c) {
    const checks = [];
    for (const sl of c.slots || []) for (const ch of sl.checks || []) if (!checks.includes(ch.id)) checks.push(ch.id);
    return h('section', { class: 'card', 'aria-labelledby': 'h-matrix' }, h('h2', { id: 'h-matrix' }, 'Slots × checks'),
      h('div', { class: 'tablewrap' }, h('table', { class: 'matrix' },
        h('caption', { class: 'sr' }, 'Each verdict by slot and check, with its target artifact'),
        h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Slot'), checks.map((id) => h('th', { scope: 'col' }, id)), h('th', { scope: 'col' }, 'Witness'))),
        h('tbody', {}, (c.slots || []).map((sl) => h('tr', {},
          h('th', { scope: 'row' }, sl.name, h('br'), h('span', { class: 'muted' }, sl.mode + ' · ' + sl.status)),
          checks.map((id) => {
            const ch = (sl.checks || []).find((x) => x.id === id);
            if (!ch) return h('td', {}, '—');
            return h('td', { 'data-check': id },
              h('p', { class: 'muted' }, ch.validator.name + '@' + ch.validator.version + ' · ' + ch.mode + ' · by ' + ch.evaluator),
              ch.targets.length === 0 ? h('p', {}, 'not evaluated') : ch.targets.map((t) => {
                const last = t.results.length ? t.results[t.results.length - 1] : null;
                return h('div', { class: 'verdict', 'data-artifact': t.artifact },
                  badge('check', t.state),
                  h('p', {}, 'on ', h('code', {}, t.artifact), ' ', h('code', { class: 'digest', title: t.digest }, t.digest.slice(0, 12))),
                  h('p', { class: 'muted' }, 'attempts ', t.results.length, ' of ', ch.attempts, last && last.note ? ' · “' + last.note + '”' : ''),
                  last && last.evidence ? h('p', { class: 'muted' }, 'evidence ', h('code', {}, last.evidence)) : null);
              }));
          }),
          h('td', {}, sl.witness ? [h('code', {}, sl.witness.artifact), ' ', h('code', { class: 'digest' }, String(sl.witness.digest || '').slice(0, 12))] : '—')))))));
  }
  function testaments(c) {
    return h('section', { class: 'card', 'aria-labelledby': 'h-test' }, h('h2', { id: 'h-test' }, 'Testaments'),
      (c.testaments || []).length === 0 ? h('p', {}, 'No testament yet.') :
        h('div', { class: 'tablewrap' }, h('table', {}, h('thead', {}, h('tr', {}, ['Testament', 'Role', 'State', 'Author', 'Outcome', 'Summary', 'Confidence', 'Evidence'].map((x) => h('th', { scope: 'col' }, x)))),
          h('tbody', {}, c.testaments.map((t) => h('tr', {},
            h('td', { 'data-label': 'Testament' }, h('code', {}, t.testament)), h('td', { 'data-label': 'Role' }, t.role), h('td', { 'data-label': 'State' }, t.state),
            h('td', { 'data-label': 'Author' }, t.author), h('td', { 'data-label': 'Outcome' }, t.outcome || '—'), h('td', { 'data-label': 'Summary', class: 'text' }, t.summary || ''),
            h('td', { 'data-label': 'Confidence' }, t.confidence !== undefined ? String(t.confidence) : '—'),
            h('td', { 'data-label': 'Evidence' }, (t.bindings || []).map((b, i) => [i ? ', ' : '', b.slot + ' → ', h('code', {}, b.artifact), ' ', h('code', { class: 'digest' }, String(b.digest).slice(0, 12))]))))))));
  }
  // artifacts lists the claim's artifacts; on a cluster, custody (the
  // claim document's member) adds each one's: the nodes holding a receipt
  // at its group's placement epoch, and those an evaluation still waits for.
  function artifacts(c, custody) {
    const list = c.artifacts || [];
    const held = Object.fromEntries((custody || []).map((k) => [k.artifact, k]));
    const cols = ['Artifact', 'Role', 'Slot', 'Kind', 'Name', 'Producer', 'Size', 'Digest'].concat(custody ? ['Custody'] : []);
    const nodes = (ids) => (ids && ids.length ? 'node ' + ids.join(', ') : 'no node');
    const custodyCell = (a) => {
      const k = held[a.artifact];
      if (!k) return '—';
      const pending = (k.missing || []).length > 0;
      return h('span', { 'data-custody': a.artifact, class: pending ? 'pending' : 'whole' },
        'held by ' + nodes(k.holders) + ' at epoch ' + k.epoch + ' of group ' + k.group + ' — ',
        pending ? h('strong', {}, 'pending: no receipt from ' + nodes(k.missing)) : 'whole');
    };
    return h('section', { class: 'card', 'aria-labelledby': 'h-art' }, h('h2', { id: 'h-art' }, 'Artifacts'),
      list.length === 0 ? h('p', {}, 'No artifact yet.') :
        h('div', { class: 'tablewrap' }, h('table', { class: 'rows' }, h('caption', { class: 'sr' }, 'Artifacts of ' + c.claim),
          h('thead', {}, h('tr', {}, cols.map((x) => h('th', { scope: 'col' }, x)))),
          h('tbody', {}, list.map((a) => h('tr', {},
            h('td', { 'data-label': 'Artifact' }, h('code', {}, a.artifact)), h('td', { 'data-label': 'Role' }, a.role),
            h('td', { 'data-label': 'Slot' }, a.slot || '—'), h('td', { 'data-label': 'Kind' }, a.kind || '—'),
            h('td', { 'data-label': 'Name' }, a.name || '—'), h('td', { 'data-label': 'Producer' }, a.producer || ''),
            h('td', { 'data-label': 'Size' }, a.size !== undefined ? kb(a.size) : '—'),
            h('td', { 'data-label': 'Digest' }, h('code', { class: 'digest', title: a.digest }, String(a.digest || '').slice(0, 12))),
            custody ? h('td', { 'data-label': 'Custody' }, custodyCell(a)) : null))))));
  }
  function chain(c, graph) {
    // The successor chain through predecessor edges, oldest first.
    const pred = {}; const succ = {};
    for (const e of graph.edges) if (e.relation === 'predecessor') { pred[e.from] = e.to; (succ[e.to] = succ[e.to] || []).push(e.from); }
    const states = Object.fromEntries(graph.claims.map((x) => [x.claim, x.state]));
    let root = c.claim; const seen = new Set([root]);
    while (pred[root] && !seen.has(pred[root])) { root = pred[root]; seen.add(root); }
    const order = []; const q = [root]; const done = new Set();
    while (q.length) { const x = q.shift(); if (done.has(x)) continue; done.add(x); order.push(x); for (const y of succ[x] || []) q.push(y); }
    const rel = (c.relations || []).filter((r) => r.relation !== 'predecessor');
    return h('section', { class: 'card', 'aria-labelledby': 'h-chain' }, h('h2', { id: 'h-chain' }, 'Successor chain and relations'),
      h('ol', { class: 'chain' }, order.map((x) => h('li', { 'aria-current': x === c.claim ? 'true' : null },
        x === c.claim ? h('strong', {}, x) : h('a', { href: href('claim', x) }, x), ' ', badge('claim', states[x] || '?')))),
      rel.length ? h('ul', {}, rel.map((r) => h('li', {}, r.relation.replace('_', ' '), ' ', h('a', { href: href('claim', r.claim) }, r.claim), ' ', badge('claim', r.state || '?'),
        r.holds === false ? ' (does not hold yet)' : r.holds ? ' (holds)' : ''))) : null);
  }

  // ---- expectations: per subject, one time axis
  async function expectations(_id, query) {
    const doc = await api(sp('/expectations'));
    const bySubject = new Map();
    for (const x of doc.expectations) {
      const key = x.subject.type + ':' + x.subject.id;
      if (!bySubject.has(key)) bySubject.set(key, []);
      bySubject.get(key).push(x);
    }
    const only = query.get('subject');
    const focus = query.get('focus');
    const sections = [];
    for (const [subject, xs] of bySubject) {
      if (only && only !== subject) continue;
      sections.push(subjectAxis(subject, xs, focus));
    }
    return {
      title: 'Expectations',
      body: [h('h1', {}, 'Expectations'),
        only ? h('p', {}, 'Subject ', h('code', {}, only), ' · ', h('a', { href: href('expectations') }, 'all subjects')) : null,
        h('p', { class: 'muted' }, 'Legend: ', h('span', { class: 'lg proj' }, '○ projected'), ' ', h('span', { class: 'lg cur' }, '◆ current'), ' ',
          h('span', { class: 'lg act' }, '■ actual'), ' ', h('span', { class: 'lg lapse' }, '▲ lapse (O overdue, S skipped, T stalled)'), ' ', h('span', { class: 'lg hz' }, '| horizon')),
        sections.length ? sections : h('p', {}, 'No expectations in this session.')],
      after: () => { if (focus) { const el = document.getElementById('x-' + focus); if (el) el.scrollIntoView({ block: 'center' }); } },
    };
  }
  function subjectAxis(subject, xs, focus) {
    const times = [];
    for (const x of xs) {
      times.push(x.projectedDue, x.currentDue);
      if (x.actualAt) times.push(x.actualAt);
      if (x.horizon) times.push(x.horizon);
      for (const l of x.lapses) times.push(l.lapsedAt);
      if (x.withdrawn) times.push(x.withdrawn.at);
    }
    const ms = times.map((t) => new Date(t).getTime());
    let lo = Math.min(...ms), hi = Math.max(...ms);
    const pad = Math.max((hi - lo) * 0.05, 36e5);
    lo -= pad; hi += pad;
    const W = 1000, rowH = 34, top = 28, left = 10, right = W - 10;
    const H = top + xs.length * rowH + 6;
    const x = (t) => left + (new Date(t).getTime() - lo) / (hi - lo) * (right - left);
    const ticks = [];
    for (let k = 0; k <= 4; k++) ticks.push(lo + (hi - lo) * k / 4);
    const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, class: 'xaxis', role: 'img', 'aria-label': 'Time axis of ' + subject },
      ticks.map((t, k) => s('g', { class: 'tick' }, s('line', { x1: x(t), y1: 18, x2: x(t), y2: H }),
        s('text', { x: x(t), y: 12, 'text-anchor': k === 0 ? 'start' : k === 4 ? 'end' : 'middle' }, fmt(new Date(t).toISOString())))),
      xs.map((e, i) => {
        const y = top + i * rowH + rowH / 2;
        const off = e.state === 'withdrawn' || e.state === 'superseded';
        return s('g', { class: 'xrow ' + (off ? 'off' : e.state) },
          s('text', { x: left, y: y - 8, class: 'lbl' }, e.expectationId + ' · ' + e.kind + ' · ' + e.state),
          s('line', { x1: x(e.projectedDue), y1: y, x2: x(e.actualAt || e.currentDue), y2: y, class: 'span' }),
          s('circle', { cx: x(e.projectedDue), cy: y, r: 6, class: 'proj' }, s('title', {}, 'projected ' + fmt(e.projectedDue))),
          s('path', { d: `M${x(e.currentDue)} ${y - 7} l7 7 l-7 7 l-7 -7 z`, class: 'cur' }, s('title', {}, 'current ' + fmt(e.currentDue))),
          e.actualAt ? s('rect', { x: x(e.actualAt) - 5, y: y - 5, width: 10, height: 10, class: 'act' }, s('title', {}, 'actual ' + fmt(e.actualAt))) : null,
          e.horizon ? s('line', { x1: x(e.horizon), y1: y - 9, x2: x(e.horizon), y2: y + 9, class: 'hz' }, s('title', {}, 'horizon ' + fmt(e.horizon))) : null,
          e.lapses.map((l) => s('g', { class: 'lapse' }, s('path', { d: `M${x(l.lapsedAt)} ${y - 9} l7 12 l-14 0 z` }),
            s('text', { x: x(l.lapsedAt), y: y + 1, 'text-anchor': 'middle', class: 'lk' }, { overdue: 'O', skipped: 'S', stalled: 'T' }[l.lapse] || '?'),
            s('title', {}, l.lapse + ' lapse at ' + fmt(l.lapsedAt)))));
      }));
    const rows = xs.map((e) => {
      const moved = e.projectedDue !== e.currentDue;
      const status = e.state === 'withdrawn' ? ['withdrawn', e.withdrawn ? ' by ' + e.withdrawn.by + ' at ' + fmt(e.withdrawn.at) + (e.withdrawn.reason ? ' — ' + e.withdrawn.reason : '') : ''] :
        e.state === 'superseded' ? ['superseded', 'by ', e.supersededBy ? h('a', { href: '#x-' + e.supersededBy }, e.supersededBy) : '?'] : [e.state];
      return h('tr', { id: 'x-' + e.expectationId, class: (e.state === 'withdrawn' || e.state === 'superseded' ? 'struck ' : '') + (e.expectationId === focus ? 'focus ' : '') + (e.lapses.length ? 'attn' : ''), 'data-expectation': e.expectationId },
        h('td', { 'data-label': 'Step' }, h('code', {}, e.expectationId), h('br'), h('span', { class: 'muted' }, e.kind), e.expects ? [h('br'), e.expects] : null),
        h('td', { 'data-label': 'State' }, badge('expectation', e.state), ' ', status.slice(1)),
        h('td', { 'data-label': 'Projected', 'data-time': 'projected' }, fmt(e.projectedDue)),
        h('td', { 'data-label': 'Current', 'data-time': 'current' }, fmt(e.currentDue), moved ? h('span', { class: 'moved' }, ' (moved ' + dur(new Date(e.currentDue) - new Date(e.projectedDue)) + (e.reanchoredAt ? ', re-anchored ' + fmt(e.reanchoredAt) : '') + ')') : null),
        h('td', { 'data-label': 'Actual', 'data-time': 'actual' }, e.actualAt ? fmt(e.actualAt) : '—'),
        h('td', { 'data-label': 'Lapses' }, e.lapses.length ? e.lapses.map((l, i) => [i ? ' ' : '', attentionBadge(l.lapse, l.lapse + ' ' + fmt(l.lapsedAt))]) : '—'),
        h('td', { 'data-label': 'Basis' }, e.basis, e.supersedes ? [h('br'), 'extends ', e.supersedes] : null));
    });
    return h('section', { class: 'card', 'aria-label': 'Subject ' + subject, 'data-subject': subject },
      h('h2', {}, 'Subject ', h('code', {}, subject)), h('div', { class: 'svgwrap' }, svg),
      h('div', { class: 'tablewrap' }, h('table', { class: 'rows' }, h('caption', { class: 'sr' }, 'Steps of ' + subject),
        h('thead', {}, h('tr', {}, ['Step', 'State', 'Projected', 'Current', 'Actual', 'Lapses', 'Basis'].map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', {}, rows))));
  }

  // ---- graph
  const GRAPH_MAX = 250;
  async function graphView(_id, query) {
    const [pl, cg, cl] = await Promise.all([api(sp('/promises?state=all')), api(sp('/claim-graph')), api(sp('/claims'))]);
    const mode = query.get('mode') || (pl.promises.length + cg.claims.length > GRAPH_MAX ? 'participants' : 'obligations');
    const focus = query.get('focus') || '';
    const depth = Number(query.get('depth') || 2);
    let g;
    if (mode === 'participants') g = participantGraph(pl.promises);
    else g = obligationGraph(pl.promises, cg, cl.claims, focus, depth);
    const form = h('form', { class: 'filters', 'aria-label': 'Graph options', onsubmit: (e) => {
      e.preventDefault();
      const fd = new FormData(form);
      location.hash = href('graph', undefined, { mode: String(fd.get('mode')), focus: String(fd.get('focus') || ''), depth: String(fd.get('depth') || '') });
    } },
    h('div', { class: 'field' }, h('label', { for: 'g-mode' }, 'Show'), h('select', { id: 'g-mode', name: 'mode' },
      h('option', { value: 'obligations', selected: mode === 'obligations' }, 'obligations and their edges'),
      h('option', { value: 'participants', selected: mode === 'participants' }, 'who owes whom (collapsed by participant)'))),
    h('div', { class: 'field' }, h('label', { for: 'g-focus' }, 'Focus on id'), h('input', { id: 'g-focus', name: 'focus', value: focus, placeholder: 'promise or claim id' })),
    h('div', { class: 'field' }, h('label', { for: 'g-depth' }, 'Neighbourhood depth'), h('input', { id: 'g-depth', name: 'depth', type: 'number', min: 1, max: 6, value: depth })),
    h('button', { type: 'submit' }, 'Show'));
    return {
      title: 'Graph',
      body: [h('h1', {}, 'Graph'), form, g.note ? h('p', { class: 'muted', role: 'note' }, g.note) : null,
        h('p', { class: 'muted' }, mode === 'participants' ? 'Each rounded node is a participant; an arrow runs from who owes to whom it is owed, with the count. ' :
          'Shapes: rectangle — promise, hexagon — claim; each node says its state and who owes whom. Arrows point at what a node waits on, drawn to its left. ' +
          'Edges: dashed — on (antecedent); dotted — depends on; dash-dot — awaits; thin — predecessor. ',
          h('span', { class: 'cyc' }, '↻ cycle'), ' marks nodes on a cycle.'),
        drawGraph(g)],
    };
  }
  function participantGraph(promises) {
    const nodes = new Map(); const edges = new Map();
    const node = (id) => { if (!nodes.has(id)) nodes.set(id, { id, kind: 'participant', label: short(id), title: id, open: 0, overdue: 0, owed: 0 }); return nodes.get(id); };
    for (const p of promises) {
      node(p.by); node(p.to);
      const open = p.state === 'owed' || p.state === 'conditional';
      const k = p.by + '\u0000' + p.to;
      if (!edges.has(k)) edges.set(k, { from: p.by, to: p.to, kind: 'owes', n: 0, open: 0, overdue: 0 });
      const e = edges.get(k);
      e.n++; if (open) e.open++; if (p.overdue) e.overdue++;
      if (open) { nodes.get(p.by).open++; nodes.get(p.to).owed++; }
      if (p.overdue) nodes.get(p.by).overdue++;
    }
    for (const n of nodes.values()) n.state = 'owes ' + n.open + (n.overdue ? ' (' + n.overdue + ' late)' : '') + ' · owed ' + n.owed;
    // Counts on the arrows while they stay legible; else in each arrow's title.
    const few = edges.size <= 40;
    for (const e of edges.values()) {
      const count = e.open + ' open' + (e.overdue ? ', ' + e.overdue + ' overdue' : '') + ' of ' + e.n;
      if (few) e.label = count; else e.detail = count;
    }
    const list = [...nodes.values()];
    for (const n of list) n.href = href('obligations', undefined, { party: n.id });
    return { nodes: list, edges: [...edges.values()], note: promises.length + ' promises collapsed into ' + list.length + ' participants: each arrow is who owes whom.' };
  }
  function obligationGraph(promises, cg, claimsList, focus, depth) {
    const nodes = new Map(); const edges = [];
    for (const p of promises) nodes.set('p:' + p.id, { id: 'p:' + p.id, kind: 'promise', label: p.id, title: p.promise, state: p.overdue ? 'overdue' : p.state, family: 'promise', href: href('promise', p.id), who: short(p.by) + ' → ' + short(p.to) });
    for (const c of cg.claims) nodes.set('c:' + c.claim, { id: 'c:' + c.claim, kind: 'claim', label: c.claim, title: c.claim, state: c.state, family: 'claim', href: href('claim', c.claim) });
    for (const c of claimsList || []) { const n = nodes.get('c:' + c.claim); if (n) { n.who = short(c.respondent) + ' → ' + short(c.claimant); n.title = c.work; } }
    for (const p of promises) if (p.on) {
      if (!nodes.has('p:' + p.on)) nodes.set('p:' + p.on, { id: 'p:' + p.on, kind: 'promise', label: p.on, title: 'not in this session', state: 'unknown', family: 'promise' });
      edges.push({ from: 'p:' + p.id, to: 'p:' + p.on, kind: 'on' });
    }
    for (const e of cg.edges) {
      for (const end of [e.from, e.to]) if (!nodes.has('c:' + end)) nodes.set('c:' + end, { id: 'c:' + end, kind: 'claim', label: end, title: 'unknown claim', state: 'unknown', family: 'claim' });
      edges.push({ from: 'c:' + e.from, to: 'c:' + e.to, kind: e.relation });
    }
    // Who owes whom: a participant node per debtor and creditor, for the
    // promises shown.
    let keep = null; let note = '';
    const adj = new Map();
    const link2 = (a, b) => { (adj.get(a) || adj.set(a, []).get(a)).push(b); (adj.get(b) || adj.set(b, []).get(b)).push(a); };
    for (const e of edges) link2(e.from, e.to);
    if (focus) {
      const start = nodes.has('p:' + focus) ? 'p:' + focus : nodes.has('c:' + focus) ? 'c:' + focus : null;
      if (!start) note = 'No promise or claim ' + focus + ' here; showing everything.';
      else {
        keep = new Set([start]); let frontier = [start];
        for (let d = 0; d < depth; d++) { const nx = []; for (const a of frontier) for (const b of adj.get(a) || []) if (!keep.has(b)) { keep.add(b); nx.push(b); } frontier = nx; }
        note = 'Neighbourhood of ' + focus + ' to depth ' + depth + ': ' + keep.size + ' nodes.';
      }
    }
    let list = [...nodes.values()].filter((n) => !keep || keep.has(n.id));
    if (!keep && list.length > GRAPH_MAX) {
      const linked = new Set(edges.flatMap((e) => [e.from, e.to]));
      list = list.filter((n) => linked.has(n.id)).slice(0, GRAPH_MAX);
      note = 'Showing ' + list.length + ' linked nodes of ' + nodes.size + '; focus on an id, or collapse by participant, to see the rest.';
    }
    const ids = new Set(list.map((n) => n.id));
    const shown = edges.filter((e) => ids.has(e.from) && ids.has(e.to));
    return { nodes: list, edges: shown, note };
  }
  function short(id) { const m = String(id).match(/[^/]+\/?$/); return m ? m[0].replace(/\/$/, '') : String(id); }

  // layout: cycles by strongly connected components; layers by longest path
  // over the acyclic condensation; order in a layer by barycentres.
  function layout(g) {
    const idx = new Map(g.nodes.map((n, i) => [n.id, i]));
    const out = g.nodes.map(() => []);
    for (const e of g.edges) { const a = idx.get(e.from), b = idx.get(e.to); if (a !== undefined && b !== undefined) out[a].push(b); }
    // Tarjan, iteratively.
    const n = g.nodes.length; const comp = new Array(n).fill(-1); const low = new Array(n); const num = new Array(n).fill(-1);
    const stack = []; const on = new Array(n).fill(false); let counter = 0; let nc = 0;
    for (let r = 0; r < n; r++) {
      if (num[r] >= 0) continue;
      const work = [[r, 0]]; num[r] = low[r] = counter++; stack.push(r); on[r] = true;
      while (work.length) {
        const top = work[work.length - 1]; const v = top[0];
        if (top[1] < out[v].length) {
          const w = out[v][top[1]++];
          if (num[w] < 0) { num[w] = low[w] = counter++; stack.push(w); on[w] = true; work.push([w, 0]); } else if (on[w]) low[v] = Math.min(low[v], num[w]);
        } else {
          work.pop();
          if (work.length) { const u = work[work.length - 1][0]; low[u] = Math.min(low[u], low[v]); }
          if (low[v] === num[v]) { let w; do { w = stack.pop(); on[w] = false; comp[w] = nc; } while (w !== v); nc++; }
        }
      }
    }
    const size = new Array(nc).fill(0); comp.forEach((c) => size[c]++);
    g.nodes.forEach((nd, i) => { nd.cycle = size[comp[i]] > 1 || out[i].includes(i); });
    // Layers: a node sits right of what it points to (dependencies left).
    const cout = Array.from({ length: nc }, () => new Set());
    for (let a = 0; a < n; a++) for (const b of out[a]) if (comp[a] !== comp[b]) cout[comp[a]].add(comp[b]);
    const layerOf = new Array(nc).fill(-1);
    const depthC = (c) => {
      const st = [[c, false]];
      while (st.length) {
        const [x, done] = st.pop();
        if (layerOf[x] >= 0) continue;
        if (done) { let m = 0; for (const y of cout[x]) m = Math.max(m, layerOf[y] + 1); layerOf[x] = m; continue; }
        st.push([x, true]);
        for (const y of cout[x]) if (layerOf[y] < 0) st.push([y, false]);
      }
    };
    for (let c = 0; c < nc; c++) depthC(c);
    const layers = [];
    g.nodes.forEach((nd, i) => { const L = layerOf[comp[i]]; nd.layer = L; (layers[L] = layers[L] || []).push(i); });
    const pos = new Array(n).fill(0);
    layers.forEach((ids) => ids.forEach((v, k) => { pos[v] = k; }));
    const inn = g.nodes.map(() => []);
    for (let a = 0; a < n; a++) for (const b of out[a]) inn[b].push(a);
    for (let pass = 0; pass < 4; pass++) {
      for (const ids of layers) {
        if (!ids) continue;
        const bary = (v) => { const nb = [...out[v], ...inn[v]]; return nb.length ? nb.reduce((t, w) => t + pos[w], 0) / nb.length : pos[v]; };
        ids.sort((a, b) => bary(a) - bary(b));
        ids.forEach((v, k) => { pos[v] = k; });
      }
    }
    return { layers: layers.map((l) => l || []), pos };
  }
  function drawGraph(g) {
    if (g.nodes.length === 0) return h('p', {}, 'Nothing to draw.');
    const { layers } = layout(g);
    const colW = 230, rowH = 74, nodeW = 180, nodeH = 56, pad = 24;
    const maxRows = Math.max(...layers.map((l) => l.length));
    const W = pad * 2 + layers.length * colW, H = pad * 2 + maxRows * rowH;
    const at = new Map();
    layers.forEach((ids, L) => ids.forEach((v, k) => {
      const nd = g.nodes[v];
      const off = (maxRows - ids.length) * rowH / 2;
      at.set(nd.id, { x: pad + L * colW + (colW - nodeW) / 2, y: pad + off + k * rowH });
    }));
    const edgeEls = g.edges.map((e) => {
      const a = at.get(e.from), b = at.get(e.to);
      if (!a || !b) return null;
      const x1 = a.x, y1 = a.y + nodeH / 2, x2 = b.x + nodeW, y2 = b.y + nodeH / 2;
      // An edge within one layer (a cycle's members share one) bows out to
      // the right of the column; the rest run leftwards to what they wait on.
      const same = a.x === b.x;
      const bow = 50 + Math.abs(y2 - y1) / 6;
      const d = same ? `M${a.x + nodeW} ${y1} C ${a.x + nodeW + bow} ${y1}, ${b.x + nodeW + bow} ${y2}, ${b.x + nodeW} ${y2}` :
        `M${x1} ${y1} C ${x1 - 40} ${y1}, ${x2 + 40} ${y2}, ${x2} ${y2}`;
      return s('g', { class: 'edge ' + e.kind.replace(/[^a-z_]/g, '') },
        s('path', { d, 'marker-end': 'url(#arrow)' }),
        e.label ? s('text', { x: (x1 + x2) / 2, y: (y1 + y2) / 2 - 4, 'text-anchor': 'middle' }, e.label) : null,
        s('title', {}, e.from.replace(/^[pc]:/, '') + ' ' + e.kind + ' ' + e.to.replace(/^[pc]:/, '') + (e.label || e.detail ? ' (' + (e.label || e.detail) + ')' : '')));
    });
    const nodeEls = g.nodes.map((nd) => {
      const p = at.get(nd.id);
      const cls = 'node ' + nd.kind + ' ' + (nd.family ? stateClass(nd.family, nd.state === 'overdue' ? 'owed' : nd.state) : 'open') + (nd.state === 'overdue' ? ' overdue' : '') + (nd.cycle ? ' cycle' : '');
      const shape = nd.kind === 'claim' ? s('path', { d: `M${p.x + 12} ${p.y} h${nodeW - 24} l12 ${nodeH / 2} l-12 ${nodeH / 2} h${-(nodeW - 24)} l-12 ${-nodeH / 2} z` }) :
        nd.kind === 'participant' ? s('rect', { x: p.x, y: p.y, width: nodeW, height: nodeH, rx: nodeH / 2 }) :
          s('rect', { x: p.x, y: p.y, width: nodeW, height: nodeH, rx: 3 });
      const stateText = (nd.family ? glyph(nd.family, nd.state) + ' ' : '') + nd.state + (nd.cycle ? ' ↻ cycle' : '');
      const label = nd.label.length > 24 ? nd.label.slice(0, 23) + '…' : nd.label;
      const inner = [shape,
        s('text', { x: p.x + nodeW / 2, y: p.y + 18, 'text-anchor': 'middle', class: 'nl' }, label),
        s('text', { x: p.x + nodeW / 2, y: p.y + 33, 'text-anchor': 'middle', class: 'ns' }, stateText),
        nd.who ? s('text', { x: p.x + nodeW / 2, y: p.y + 48, 'text-anchor': 'middle', class: 'nw' }, nd.who.length > 30 ? nd.who.slice(0, 29) + '…' : nd.who) : null,
        s('title', {}, nd.title + ' — ' + nd.state)];
      return nd.href ? s('a', { href: nd.href, class: cls, 'data-node': nd.id, 'aria-label': nd.kind + ' ' + nd.title + ', ' + stateText }, inner) :
        s('g', { class: cls, 'data-node': nd.id }, inner);
    });
    return h('div', { class: 'svgwrap graph' }, s('svg', { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'group', 'aria-label': 'Graph of ' + g.nodes.length + ' nodes and ' + g.edges.length + ' edges' },
      s('defs', {}, s('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' }, s('path', { d: 'M0 0 L10 5 L0 10 z' }))),
      edgeEls, nodeEls));
  }

  // ---- live: the event stream over fetch (EventSource cannot send the
  // bearer header), resumed from the last sequence seen.
  let stream = null;
  function setLive(state, text) {
    const el = $('#live');
    el.className = 'live ' + state;
    el.textContent = text;
  }
  function stopStream() {
    if (stream) stream.abort.abort();
    stream = null;
    setLive('off', 'not connected');
  }
  function startStream() {
    stopStream();
    const me = { abort: new AbortController(), seq: null };
    stream = me;
    (async () => {
      let backoff = 500;
      try { me.seq = (await api(sp('/summary'))).seq; } catch { me.seq = 0; }
      while (stream === me) {
        try {
          const r = await fetch(sp('/events?after=' + me.seq), { headers: headers({ Accept: 'text/event-stream' }), signal: me.abort.signal, cache: 'no-store' });
          if (!r.ok) throw new Error('event stream: ' + r.status);
          setLive('on', 'live · record ' + me.seq);
          backoff = 500;
          const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
          let buf = '';
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            buf += value;
            let cut;
            while ((cut = buf.indexOf('\n\n')) >= 0) {
              const block = buf.slice(0, cut); buf = buf.slice(cut + 2);
              let id = null;
              for (const line of block.split('\n')) if (line.startsWith('id: ')) id = Number(line.slice(4));
              if (id !== null && id > me.seq) { me.seq = id; setLive('on', 'live · record ' + id); changed(); }
            }
          }
        } catch (err) {
          if (me.abort.signal.aborted) return;
        }
        if (stream !== me) return;
        setLive('bad', 'disconnected — reconnecting from record ' + me.seq);
        await new Promise((res) => setTimeout(res, backoff));
        backoff = Math.min(backoff * 2, 10000);
      }
    })();
  }
  let pending = 0;
  let drawCost = 0; // how long the last draw took: a costly view redraws less often
  // changed schedules one redraw; records arriving meanwhile join it, so a
  // steady stream of writes redraws at a bounded rate instead of never.
  function changed(wait = 250) {
    if (pending) return;
    pending = setTimeout(() => { pending = 0; if (refresh) refresh(); }, Math.max(wait, Math.min(4 * drawCost, 5000)));
  }

  // ---- start
  $('#signout').addEventListener('click', () => signOut());
  $('#signout').hidden = !auth.token;
  window.addEventListener('hashchange', () => { render(); main().focus({ preventScroll: true }); });
  // Relative times age: redraw the view each minute.
  setInterval(() => { if (refresh) refresh(); }, 60000);
  render();
})();
