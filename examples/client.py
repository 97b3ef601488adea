#!/usr/bin/env python3
"""A Canopy API client in plain Python (standard library only).

Submits a workload spec (TOML) to a Canopy server, follows the workload
until it ends, prints its stdout log, lists its artifacts and downloads
the first file among them.

    canopy serve --listen 127.0.0.1:7878          # on the server
    canopy token create --name ci --role submitter # prints the token once

    export CANOPY_SERVER=http://127.0.0.1:7878     # what the CLI reads too
    export CANOPY_TOKEN=canopy_...
    python3 examples/client.py assets/specs/hello.toml --out ./downloads

A webhook receiver checks each delivery's signature the same way this
does (the secret is the one the server's admin shares; see the README's
"Webhooks"):

    export CANOPY_WEBHOOK_SECRET=...
    python3 examples/client.py verify-webhook "$CANOPY_SIGNATURE_HEADER" body.json

The submit carries an Idempotency-Key (a fresh one unless --key is
given): if the answer is lost and the script is run again with the same
key and spec, the server returns the same workload instead of running it
twice.

Exit status: 0 when the workload succeeded, 1 when it failed or was
cancelled, 2 when the server refused a request or could not be reached.
"""

import argparse
import hashlib
import hmac
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

FINAL = {"succeeded", "failed", "cancelled"}


def verify_webhook(header, secret, body, now=None, tolerance=300):
    """Whether a delivery's Canopy-Signature header (t=<unix s>,v1=<hex>)
    signs body (bytes) under secret (bytes), made at most tolerance
    seconds from now. HMAC-SHA256 over b"<t>." + body; several v1 values
    (a secret being rotated) may be given; compared in constant time."""
    t, sigs = None, []
    for part in header.split(","):
        k, _, v = part.strip().partition("=")
        if k == "t":
            t = v
        elif k == "v1":
            sigs.append(v)
    if t is None or not t.lstrip("-").isdigit() or not sigs:
        return False
    if abs((time.time() if now is None else now) - int(t)) > tolerance:
        return False
    want = hmac.new(secret, t.encode() + b"." + body, hashlib.sha256).hexdigest()
    return any(hmac.compare_digest(want, s) for s in sigs)


def record(view):
    """The workload record of a workload view ({"workload": {...}, "attempts": [...]})."""
    return view.get("workload", view)


def workload_id(view):
    """The id as paths and messages show it: w-17."""
    return record(view)["id"]


class ApiError(Exception):
    """The server's error shape: {"error": {"code", "message", "problems"?}}."""

    def __init__(self, status, code, message, problems=None):
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message, self.problems = status, code, message, problems or []


class Canopy:
    def __init__(self, base, token, timeout=30):
        self.base = base.rstrip("/")
        self.token = token
        self.timeout = timeout

    def request(self, method, path, body=None, headers=None):
        """Sends one request; returns (status, headers, body bytes)."""
        req = urllib.request.Request(self.base + path, data=body, method=method)
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return resp.status, resp.headers, resp.read()
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                err = json.loads(raw)["error"]
            except (ValueError, KeyError, TypeError):
                err = {"code": "unknown", "message": raw.decode("utf-8", "replace") or e.reason}
            raise ApiError(e.code, err.get("code"), err.get("message"), err.get("problems")) from None
        except urllib.error.URLError as e:
            raise ApiError(0, "unreachable", f"no Canopy server answers at {self.base}: {e.reason}") from None

    def json(self, method, path, body=None, headers=None):
        _, _, raw = self.request(method, path, body, headers)
        return json.loads(raw)

    def submit(self, spec_toml, key):
        status, _, raw = self.request(
            "POST",
            "/v1/workloads",
            spec_toml.encode("utf-8"),
            {"Content-Type": "application/toml", "Idempotency-Key": key},
        )
        return status, json.loads(raw)

    def workload(self, wid):
        return self.json("GET", f"/v1/workloads/{wid}")

    def wait(self, wid, poll=0.25, max_poll=2.0):
        """Polls until the workload is final; prints each new state."""
        last = None
        while True:
            w = self.workload(wid)
            rec = record(w)
            if rec["state"] != last:
                last = rec["state"]
                why = f" ({rec['reason']})" if rec.get("reason") else ""
                print(f"{wid}: {last}{why}", file=sys.stderr, flush=True)
            if last in FINAL:
                return w
            time.sleep(poll)
            poll = min(poll * 1.5, max_poll)

    def log(self, wid, stream="stdout"):
        _, _, raw = self.request("GET", f"/v1/workloads/{wid}/logs?stream={stream}")
        return raw.decode("utf-8", "replace")

    def artifacts(self, wid):
        return self.json("GET", f"/v1/workloads/{wid}/artifacts")

    def download(self, artifact, out_dir):
        """Downloads one file artifact into out_dir; checks its SHA-256."""
        _, _, data = self.request("GET", artifact["download"])
        digest = hashlib.sha256(data).hexdigest()
        if digest != artifact["sha256"]:
            raise ApiError(0, "corrupt", f"{artifact['name']}: sha256 {digest}, expected {artifact['sha256']}")
        os.makedirs(out_dir, exist_ok=True)
        # The name comes from the server: keep only its last component.
        path = os.path.join(out_dir, os.path.basename(artifact["name"]) or "artifact")
        with open(path, "wb") as f:
            f.write(data)
        return path


def verify_main(argv):
    """verify-webhook HEADER BODY_FILE: exit 0 when the signature holds."""
    p = argparse.ArgumentParser(prog="client.py verify-webhook", description="Check a webhook delivery's signature.")
    p.add_argument("header", help="the Canopy-Signature header's value")
    p.add_argument("body", help="the delivery's body, as received (a file)")
    args = p.parse_args(argv)
    secret = os.environ.get("CANOPY_WEBHOOK_SECRET")
    if not secret:
        print("error: set CANOPY_WEBHOOK_SECRET to the secret the server signs with", file=sys.stderr)
        return 2
    with open(args.body, "rb") as f:
        body = f.read()
    if verify_webhook(args.header, secret.encode(), body):
        print("signature ok")
        return 0
    print("signature does not verify", file=sys.stderr)
    return 1


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["verify-webhook"]:
        return verify_main(argv[1:])
    p = argparse.ArgumentParser(description="Submit a Canopy workload and follow it to the end.")
    p.add_argument("spec", help="the workload spec (TOML); '-' reads standard input")
    p.add_argument("--key", help="the Idempotency-Key (default: a fresh one)")
    p.add_argument("--out", default=".", help="where to download the first file artifact (default: .)")
    args = p.parse_args(argv)

    # CANOPY_SERVER is what the canopy CLI reads; CANOPY_URL is this
    # example's older name for it.
    base = os.environ.get("CANOPY_SERVER") or os.environ.get("CANOPY_URL")
    if not base:
        print("error: set CANOPY_SERVER (e.g. http://127.0.0.1:7878) and CANOPY_TOKEN", file=sys.stderr)
        return 2
    api = Canopy(base, os.environ.get("CANOPY_TOKEN"))
    spec = sys.stdin.read() if args.spec == "-" else open(args.spec, encoding="utf-8").read()
    key = args.key or f"client-py-{uuid.uuid4()}"

    try:
        status, w = api.submit(spec, key)
        wid = workload_id(w)
        again = " (already submitted with this key)" if status == 200 else ""
        print(f"submitted {wid} as {record(w).get('submitted_by')}{again}", flush=True)
        state = record(api.wait(wid))["state"]
        print(f"{wid} {state}", flush=True)
        print("--- stdout ---", flush=True)
        sys.stdout.write(api.log(wid))
        print("--- artifacts ---", flush=True)
        arts = api.artifacts(wid)
        for a in arts:
            print(f"{a['attempt']}  {a['name']}  {a['bytes']} bytes  sha256 {a['sha256'][:12]}", flush=True)
        if not arts:
            print("(none)", flush=True)
        first = next((a for a in arts if a.get("download")), None)
        if first:
            print(f"downloaded {api.download(first, args.out)}", flush=True)
    except ApiError as e:
        print(f"error: {e}", file=sys.stderr)
        for d in e.problems:
            print(f"  {d.get('file')}:{d.get('line')}:{d.get('col')}: {d.get('message')}", file=sys.stderr)
        return 2
    return 0 if state == "succeeded" else 1


if __name__ == "__main__":
    sys.exit(main())
