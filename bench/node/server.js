// bench/node/server.js - peer for bench/run.sh: the server a Node.js user
// would write instead of lockd: the npm `redlock` package (v4, one Redis:
// REDIS_PORT, or a quorum over several: REDIS_PORTS=p1,p2,p3) behind node's
// http module, with lockd's routes and answers:
//   POST /locks/{name} {"ttl_ms","wait_ms"} -> 200 {"name","lease","fencing_token":null} + Lock-Lease
//                                            409 {"error":"locked"}
//   DELETE /locks/{name} + Lock-Lease       -> 200 {"name","released":true} / 404
//   GET /stats -> {"grants","attempts"} (redlock tries, to count failed acquires)
// Waiting is redlock's own retry loop (retryDelay 200 ms +- jitter, its defaults
// scaled to wait_ms): that is what redlock users get. Not part of lockd.
'use strict';
const http = require('http');
const Redis = require('ioredis');
const Redlock = require('redlock');

const port = Number(process.env.PORT);
const redis = String(process.env.REDIS_PORTS || process.env.REDIS_PORT).split(',')
  .map((p) => new Redis(Number(p), '127.0.0.1'));
const once = new Redlock(redis, { retryCount: 0, driftFactor: 0.01 });
const RETRY_DELAY = 200, RETRY_JITTER = 100; // redlock's defaults
const waiting = new Map(); // retry count -> Redlock instance
const held = new Map();    // lease -> Lock
let grants = 0, attempts = 0;

function redlockFor(waitMs) {
  if (waitMs <= 0) return once;
  const n = Math.max(1, Math.ceil(waitMs / RETRY_DELAY));
  if (!waiting.has(n))
    waiting.set(n, new Redlock(redis, { retryCount: n, retryDelay: RETRY_DELAY, retryJitter: RETRY_JITTER }));
  return waiting.get(n);
}

function send(res, code, obj, headers) {
  const body = JSON.stringify(obj);
  res.writeHead(code, Object.assign({ 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) }, headers || {}));
  res.end(body);
}

http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (d) => chunks.push(d));
  req.on('end', () => {
    if (req.url === '/stats') return send(res, 200, { grants, attempts });
    if (req.url === '/healthz') return send(res, 200, { ok: true });
    const m = /^\/locks\/([A-Za-z0-9._:-]{1,255})$/.exec(req.url);
    if (!m) return send(res, 404, { error: 'not_found' });
    const name = m[1];
    if (req.method === 'POST') {
      let args = {};
      try { if (chunks.length) args = JSON.parse(Buffer.concat(chunks).toString()); } catch (e) {
        return send(res, 400, { error: 'invalid_json' });
      }
      const ttl = args.ttl_ms || 30000;
      redlockFor(args.wait_ms || 0).lock('lock:' + name, ttl).then((lock) => {
        grants++; attempts += lock.attempts;
        held.set(lock.value, lock);
        send(res, 200, { name, lease: lock.value, fencing_token: null, ttl_ms: ttl }, { 'Lock-Lease': lock.value });
      }, (err) => {
        attempts += err.attempts || 1;
        send(res, 409, { error: 'locked' });
      });
    } else if (req.method === 'DELETE') {
      const lease = req.headers['lock-lease'];
      const lock = held.get(lease);
      if (!lock) return send(res, 404, { error: 'not_held' });
      held.delete(lease);
      lock.unlock().then(() => send(res, 200, { name, released: true }),
        () => send(res, 404, { error: 'not_held' }));
    } else {
      send(res, 405, { error: 'method_not_allowed' });
    }
  });
}).listen(port, '127.0.0.1');
