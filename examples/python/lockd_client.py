#!/usr/bin/env python3
"""lockd_client.py - a lockd client in Python's standard library only.

    from lockd_client import Lockd
    lockd = Lockd("http://127.0.0.1:8080")          # or LOCKD_URL, LOCKD_TOKEN
    with lockd.lock("reports.nightly", ttl_ms=10000, wait_ms=5000) as lease:
        write_report(fencing_token=lease.fencing_token)

The context manager renews the lease every ttl/3 in a background thread and
releases it on exit. `lease.lost` becomes true if lockd says the lease is gone
(404 not_held / 409 held_by_other): stop writing then. Pass the fencing token
to whatever you protect so that it can reject a stale holder.

Run as a script it acquires, inspects, renews and releases one lock:
    python3 examples/python/lockd_client.py [NAME]
"""
import json
import os
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request


class LockdError(Exception):
    """lockd answered an error: status, code (e.g. "locked") and the JSON body."""

    def __init__(self, status, body):
        self.status = status
        self.body = body
        self.code = body.get("error", "")
        super().__init__(f"{status} {self.code}: {body.get('message', '')}")


class Lockd:
    def __init__(self, url=None, token=None, timeout=15.0):
        self.url = (url or os.environ.get("LOCKD_URL") or "http://127.0.0.1:8080").rstrip("/")
        self.token = token or os.environ.get("LOCKD_TOKEN")
        self.timeout = timeout

    def _call(self, method, path, body=None, lease=None, timeout=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        if lease:
            req.add_header("Lock-Lease", lease)
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout) as resp:
                return json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                err = json.loads(raw)
            except ValueError:
                err = {"error": "", "message": raw.decode(errors="replace")}
            raise LockdError(e.code, err) from None

    @staticmethod
    def _name(name):
        return urllib.parse.quote(name, safe="")

    def acquire(self, name, ttl_ms=30000, wait_ms=0, owner=None, session=None):
        """Returns the grant dict (lease, fencing_token, ...); raises LockdError
        with code "locked" when not granted within wait_ms."""
        body = {"ttl_ms": ttl_ms, "wait_ms": wait_ms}
        if owner:
            body["owner"] = owner
        if session:
            body["session"] = session
        return self._call("POST", "/locks/" + self._name(name), body,
                          timeout=self.timeout + wait_ms / 1000.0)

    def renew(self, name, lease, ttl_ms=None):
        body = {"ttl_ms": ttl_ms} if ttl_ms else None
        return self._call("PUT", "/locks/" + self._name(name), body, lease=lease)

    def release(self, name, lease):
        return self._call("DELETE", "/locks/" + self._name(name), lease=lease)

    def inspect(self, name):
        return self._call("GET", "/locks/" + self._name(name))

    def watch(self, name, index, wait_ms=30000):
        """Long-polls until the lock's index is no longer `index` or wait_ms
        passes; returns the inspect body (its "index" to pass next time)."""
        q = urllib.parse.urlencode({"index": index, "wait_ms": wait_ms})
        return self._call("GET", "/locks/" + self._name(name) + "?" + q,
                          timeout=self.timeout + wait_ms / 1000.0)

    def create_session(self, ttl_ms=10000, owner=None):
        """Returns the session's id; its locks go when it ends or expires."""
        body = {"ttl_ms": ttl_ms}
        if owner:
            body["owner"] = owner
        return self._call("POST", "/sessions", body)["session"]

    def heartbeat(self, session):
        """Extends the session; the body's "lost" names locks it lost."""
        return self._call("PUT", "/sessions/" + self._name(session))

    def end_session(self, session):
        """Ends the session and releases its locks at once."""
        return self._call("DELETE", "/sessions/" + self._name(session))

    def lock(self, name, ttl_ms=30000, wait_ms=0, owner=None):
        return _Held(self, name, ttl_ms, wait_ms, owner)


class _Held:
    """Context manager: acquire on enter, renew every ttl/3, release on exit."""

    def __init__(self, client, name, ttl_ms, wait_ms, owner):
        self.client, self.name = client, name
        self.ttl_ms, self.wait_ms, self.owner = ttl_ms, wait_ms, owner
        self.lease = None
        self.fencing_token = None
        self.lost = False
        self._stop = threading.Event()
        self._thread = None

    def __enter__(self):
        grant = self.client.acquire(self.name, self.ttl_ms, self.wait_ms, self.owner)
        self.lease = grant["lease"]
        self.fencing_token = grant["fencing_token"]
        self._thread = threading.Thread(target=self._renew_loop, daemon=True)
        self._thread.start()
        return self

    def _renew_loop(self):
        while not self._stop.wait(self.ttl_ms / 3000.0):
            try:
                self.client.renew(self.name, self.lease)
            except LockdError as e:
                if e.code in ("not_held", "held_by_other"):
                    self.lost = True
                    return
            except OSError:
                pass  # lockd unreachable: try again; the lease expires at its ttl

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        if not self.lost:
            try:
                self.client.release(self.name, self.lease)
            except LockdError:
                pass
        return False


def main():
    name = sys.argv[1] if len(sys.argv) > 1 else "examples.python"
    lockd = Lockd()
    with lockd.lock(name, ttl_ms=10000, wait_ms=5000, owner="python-example") as held:
        print(f"acquired {name}: fencing_token={held.fencing_token}")
        info = lockd.inspect(name)
        print(f"inspect: held={info['held']} owner={info.get('owner')}")
        grant = lockd.renew(name, held.lease, ttl_ms=20000)
        print(f"renewed: ttl_ms={grant['ttl_ms']} fencing_token={grant['fencing_token']}")
    print(f"released {name}: held={lockd.inspect(name)['held']}")
    try:
        other = lockd.acquire(name, ttl_ms=5000)
        lockd.acquire(name, wait_ms=0)
    except LockdError as e:
        print(f"second acquire refused: {e.code}")
        lockd.release(name, other["lease"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
