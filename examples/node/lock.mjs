// lock.mjs - a lockd client for Node.js 18+ with the built-in fetch, no packages.
//
//   LOCKD_URL=http://127.0.0.1:8080 node examples/node/lock.mjs [NAME]
//
// withLock(name, fn) acquires, renews every ttl/3 while fn runs, and releases;
// fn gets { fencingToken, lease, signal } where signal aborts if the lease is
// lost. Fencing tokens are JSON integers below 2^53, so a JS number holds them.

const URL_BASE = (process.env.LOCKD_URL ?? 'http://127.0.0.1:8080').replace(/\/+$/, '');
const TOKEN = process.env.LOCKD_TOKEN;

export class LockdError extends Error {
  constructor(status, body) {
    super(`${status} ${body.error}: ${body.message}`);
    this.status = status;
    this.code = body.error;
    this.body = body;
  }
}

async function call(method, path, { body, lease, timeoutMs = 15000 } = {}) {
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (TOKEN) headers.Authorization = `Bearer ${TOKEN}`;
  if (lease) headers['Lock-Lease'] = lease;
  const res = await fetch(URL_BASE + path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const json = await res.json().catch(() => ({ error: '', message: res.statusText }));
  if (!res.ok) throw new LockdError(res.status, json);
  return json;
}

const lockPath = (name) => `/locks/${encodeURIComponent(name)}`;

export const acquire = (name, { ttlMs = 30000, waitMs = 0, owner } = {}) =>
  call('POST', lockPath(name), {
    body: { ttl_ms: ttlMs, wait_ms: waitMs, ...(owner ? { owner } : {}) },
    timeoutMs: 15000 + waitMs,
  });
export const renew = (name, lease, ttlMs) =>
  call('PUT', lockPath(name), { lease, body: ttlMs ? { ttl_ms: ttlMs } : undefined });
export const release = (name, lease) => call('DELETE', lockPath(name), { lease });
export const inspect = (name) => call('GET', lockPath(name));

export async function withLock(name, fn, { ttlMs = 30000, waitMs = 0, owner } = {}) {
  const grant = await acquire(name, { ttlMs, waitMs, owner });
  const lost = new AbortController();
  const timer = setInterval(async () => {
    try {
      await renew(name, grant.lease);
    } catch (e) {
      if (e instanceof LockdError && (e.code === 'not_held' || e.code === 'held_by_other')) {
        clearInterval(timer);
        lost.abort(new Error(`lock ${name} lost`));
      } // else: lockd unreachable for now; the lease expires at its ttl
    }
  }, ttlMs / 3);
  try {
    return await fn({ fencingToken: grant.fencing_token, lease: grant.lease, signal: lost.signal });
  } finally {
    clearInterval(timer);
    if (!lost.signal.aborted) await release(name, grant.lease).catch(() => {});
  }
}

async function main() {
  const name = process.argv[2] ?? 'examples.node';
  await withLock(name, async ({ fencingToken }) => {
    console.log(`acquired ${name}: fencing_token=${fencingToken}`);
    const info = await inspect(name);
    console.log(`inspect: held=${info.held} owner=${info.owner}`);
    try {
      await acquire(name, { waitMs: 0 });
    } catch (e) {
      console.log(`second acquire refused: ${e.code}`);
    }
  }, { ttlMs: 10000, waitMs: 5000, owner: 'node-example' });
  console.log(`released ${name}: held=${(await inspect(name)).held}`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((e) => {
    console.error(e.message);
    process.exit(1);
  });
}
