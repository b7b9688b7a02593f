#!/usr/bin/env python3
"""leader_election.py - leader election with lockd: README's recipe for curl
users, in Python's standard library (lockd_client.py beside it).

    python3 examples/python/leader_election.py NAME ID [SESSION_TTL_MS]

Run the same on every machine, each with its own ID. Each candidate:
  - opens a session (default ttl 6000 ms) and heartbeats it every ttl/3;
  - campaigns: a waiting acquire of NAME under the session (409 locked after
    wait_ms: ask again);
  - leads while it holds NAME: here it prints "leader ID token=T" and works
    until stopped; pass T along with every write the leader makes;
  - stops leading as soon as a heartbeat names NAME in "lost" or finds the
    session gone, or when no heartbeat was answered for 2/3 of the session
    ttl (lockd may hand the lock to the next candidate once the session
    could have expired); it then campaigns again under a new session;
  - while it does not lead, watches the holder (GET ?index=&wait_ms=) and
    prints each change.
SIGTERM or SIGINT resigns: the session ends, which releases NAME at once, so
the next candidate leads without waiting for the session ttl; exit 0.

Lines on stdout (one per event, flushed):
    leader ID token=T                  became the leader with fencing token T
    watch ID held=B owner=O token=T    a change of holder seen while not leading
    lost ID: WHY                       stopped leading without being asked
    resigned ID                        stopped on SIGTERM or SIGINT
"""
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lockd_client import Lockd, LockdError  # noqa: E402

WAIT_MS = 1000  # a campaign's acquire waits in turns this long
WATCH_MS = 5000  # a watch waits at most this long before asking again


_say_lock = threading.Lock()


def say(line):
    # One write per line, under a lock: print() writes the text and the
    # newline separately, so the watcher thread's line and the main thread's
    # could interleave ("watch ... leader c ...") and a reader of the output
    # would miss a line that does not start where it should.
    with _say_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


class Candidate:
    def __init__(self, lockd, name, me, session_ttl_ms):
        self.lockd, self.name, self.me = lockd, name, me
        self.ttl_ms = session_ttl_ms
        self.stop = threading.Event()
        self.leading = False

    def run(self):
        threading.Thread(target=self._watch, daemon=True).start()
        while not self.stop.is_set():
            try:
                self._campaign()
            except (LockdError, OSError) as e:  # lockd unreachable or unavailable
                print(f"{self.me}: {e}; campaigning again", file=sys.stderr, flush=True)
                self.stop.wait(0.5)
        say(f"resigned {self.me}")
        return 0

    def _campaign(self):
        session = self.lockd.create_session(self.ttl_ms, owner=self.me)
        state = {"ok_at": time.monotonic(), "lost": None}
        done = threading.Event()
        hb = threading.Thread(target=self._heartbeat, args=(session, state, done), daemon=True)
        hb.start()
        try:
            grant = None
            while grant is None and not self.stop.is_set() and state["lost"] is None:
                try:
                    grant = self.lockd.acquire(self.name, wait_ms=WAIT_MS, owner=self.me,
                                               session=session)
                except LockdError as e:
                    if e.code != "locked":
                        raise
            if grant is None:
                return
            self.leading = True
            say(f"leader {self.me} token={grant['fencing_token']}")
            # Lead. The leader's work goes here, in small steps, each checking
            # that leadership is not in doubt.
            while not self.stop.wait(0.05):
                why = state["lost"]
                if why is None and time.monotonic() - state["ok_at"] > self.ttl_ms * 2 / 3000.0:
                    why = "no heartbeat answered within 2/3 of the session ttl"
                if why is not None:
                    say(f"lost {self.me}: {why}")
                    return
        finally:
            self.leading = False
            done.set()
            hb.join()
            try:
                self.lockd.end_session(session)  # resign: releases NAME at once
            except (LockdError, OSError):
                pass

    def _heartbeat(self, session, state, done):
        while not done.wait(self.ttl_ms / 3000.0):
            sent = time.monotonic()
            try:
                body = self.lockd.heartbeat(session)
            except LockdError as e:
                if e.status == 404:
                    state["lost"] = "the session expired"
                    return
                continue  # 503: lockd cannot reach its backend; the clock runs
            except OSError:
                continue  # lockd unreachable; the clock runs
            state["ok_at"] = sent
            if self.name in body.get("lost", []):
                state["lost"] = "lockd reports the lock lost"
                return

    def _watch(self):
        index = -1
        while not self.stop.is_set():
            try:
                if index < 0:
                    info = self.lockd.inspect(self.name)
                else:
                    info = self.lockd.watch(self.name, index, wait_ms=WATCH_MS)
            except (LockdError, OSError):
                self.stop.wait(0.5)
                continue
            if info.get("index") == index:
                continue  # wait_ms passed with no change: ask again
            index = info.get("index", 0)
            if not self.leading:
                say(f"watch {self.me} held={str(info['held']).lower()} "
                    f"owner={info.get('owner')} token={info.get('fencing_token')}")


def main():
    if len(sys.argv) < 3:
        print("usage: leader_election.py NAME ID [SESSION_TTL_MS]", file=sys.stderr)
        return 64
    name, me = sys.argv[1], sys.argv[2]
    ttl_ms = int(sys.argv[3]) if len(sys.argv) > 3 else 6000
    cand = Candidate(Lockd(), name, me, ttl_ms)
    signal.signal(signal.SIGTERM, lambda *_: cand.stop.set())
    signal.signal(signal.SIGINT, lambda *_: cand.stop.set())
    return cand.run()


if __name__ == "__main__":
    sys.exit(main())
