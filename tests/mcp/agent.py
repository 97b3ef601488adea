"""An agent, as the official Python MCP SDK (PyPI `mcp`) makes one, against
Canopy's MCP server: over Streamable HTTP (`/mcp` on a real `canopy serve`)
or over stdio (`canopy mcp`, started as a child process the way an agent host
starts it). Run by tests/mcp_agents.rs, which starts the server, makes the
tokens and checks the audit trail afterwards.

    python3 agent.py http|stdio

Everything else comes in the environment (see `main`). It asserts what an
agent would notice and prints one JSON line with what the Rust side checks
next (the ids it made); any failure is an exception and a non-zero exit.
"""

import asyncio
import json
import os
import sys
import time

try:
    import httpx2 as httpx
except ImportError:  # mcp 1.x depends on httpx
    import httpx

from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

MUTATING = {"submit", "cancel", "retry"}
ALL = {"plan", "submit", "status", "list", "explain", "logs", "events", "artifacts", "cancel", "retry", "fleet"}


def env(name):
    v = os.environ.get(name)
    if not v:
        raise SystemExit(f"agent.py: ${name} is not set")
    return v


def connect(mode, token):
    """A Client acting as `token`, over `mode`."""
    if mode == "http":
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        return Client(streamable_http_client(env("CANOPY_MCP_URL"), http_client=http))
    params = StdioServerParameters(
        command=env("CANOPY_BIN"),
        args=["mcp"],
        env={"CANOPY_SERVER": env("CANOPY_SERVER"), "CANOPY_TOKEN": token, "CANOPY_LOG": "warn"},
    )
    return Client(params)


def result(r):
    """A tool result's structured answer, and whether it is an error."""
    data = r.structured_content
    if data is None:
        text = "".join(getattr(c, "text", "") for c in r.content)
        data = json.loads(text) if text else None
    return data, bool(r.is_error)


async def ok(client, tool, args):
    data, err = result(await client.call_tool(tool, args))
    assert not err, f"{tool} {args} failed: {data}"
    return data


async def refused(client, tool, args):
    data, err = result(await client.call_tool(tool, args))
    assert err, f"{tool} {args} was not refused: {data}"
    return data["error"]


async def wait_state(client, wid, states, deadline=60):
    end = time.monotonic() + deadline
    while True:
        v = await ok(client, "status", {"id": wid})
        state = v["workload"]["state"]
        if state in states:
            return v
        assert time.monotonic() < end, f"{wid} is still {state}"
        await asyncio.sleep(0.2)


async def submitter(mode, out):
    spec = open(env("SPEC_OK")).read()
    async with connect(mode, env("TOKEN_SUBMITTER")) as c:
        names = {t.name for t in (await c.list_tools()).tools}
        assert names == ALL, names
        plan = await ok(c, "plan", {"spec": spec})
        assert plan["fits"] is True and plan["candidates"][0]["pool"].startswith("local"), plan
        sub = await ok(c, "submit", {"spec": spec, "idempotency_key": f"mcp-{mode}-1"})
        wid = sub["workload"]["workload"]["id"]
        assert sub["placed_by"]["fits"] is True, sub
        # The same key again: the same workload, not a second one.
        again = await ok(c, "submit", {"spec": spec, "idempotency_key": f"mcp-{mode}-1"})
        assert again["workload"]["workload"]["id"] == wid and again["workload"]["existing"] is True, again
        done = await wait_state(c, wid, {"succeeded", "failed", "cancelled"})
        assert done["workload"]["state"] == "succeeded", done
        logs = await ok(c, "logs", {"id": wid})
        assert "hello from an agent" in logs["text"], logs
        # Control characters of the workload's output never reach the agent.
        assert "\x1b" not in logs["text"] and "\x07" not in logs["text"], repr(logs["text"])
        assert logs["next_offset"] == logs["offset"] + logs["bytes"], logs
        more = await ok(c, "logs", {"id": wid, "offset": logs["next_offset"]})
        assert more["bytes"] == 0 and more["text"] == "", more
        explain = await ok(c, "explain", {"id": wid})
        assert explain["placements"] and explain["placements"][0]["pool"], explain
        events = await ok(c, "events", {"id": wid})
        assert any(e["kind"] == "succeeded" for e in events), events
        arts = await ok(c, "artifacts", {"id": wid})
        uri = next(a["uri"] for a in arts if a["name"] == "result")
        read = await c.read_resource(uri)
        assert read.contents[0].text == "42", read
        fleet = await ok(c, "fleet", {})
        assert any(p["pool"].startswith("local") for p in fleet["pools"]), fleet
        listed = await ok(c, "list", {"state": "succeeded"})
        assert any(w["workload"]["id"] == wid for w in listed["workloads"]), listed
        out["succeeded"] = wid

        # Cancel takes two steps; a stale, unknown or foreign id acts on nothing.
        queued = open(env("SPEC_QUEUED")).read()
        a = (await ok(c, "submit", {"spec": queued, "idempotency_key": f"mcp-{mode}-q1"}))["workload"]["workload"]["id"]
        b = (await ok(c, "submit", {"spec": queued, "idempotency_key": f"mcp-{mode}-q2"}))["workload"]["workload"]["id"]
        first = await ok(c, "cancel", {"id": a, "reason": "agent test"})
        assert first["confirmation_required"] is True and first["confirm"].startswith("confirm-"), first
        assert a in first["would"], first
        bogus = await refused(c, "cancel", {"id": a, "confirm": "confirm-0000"})
        assert "unknown or already used" in bogus, bogus
        foreign = await refused(c, "cancel", {"id": b, "confirm": first["confirm"]})
        assert "was issued for cancel on " + a in foreign, foreign
        for w in (a, b):
            v = await ok(c, "status", {"id": w})
            assert v["workload"]["state"] == "queued", v
        done = await ok(c, "cancel", {"id": a, "reason": "agent test", "confirm": first["confirm"]})
        assert "cancel" in done["message"], done
        stale = await refused(c, "cancel", {"id": a, "confirm": first["confirm"]})
        assert "unknown or already used" in stale, stale
        await wait_state(c, a, {"cancelled"})
        out["cancelled"], out["still_queued"] = a, b
        out["confirm_of_a"] = None  # used up
        second = await ok(c, "cancel", {"id": b})
        out["confirm_of_b"] = second["confirm"]

        # A submit estimated above the confirmation threshold ($25 by
        # default) takes two calls too; the id is bound to the spec and key.
        big = open(env("SPEC_BIG")).read()
        key = f"mcp-{mode}-big"
        first = await ok(c, "submit", {"spec": big, "idempotency_key": key})
        assert first["confirmation_required"] is True, first
        assert "above this server's confirmation threshold of $25.00" in first["would"], first
        assert first["plan"]["fits"] is True, first
        other = await refused(c, "submit", {"spec": big, "idempotency_key": key + "-2", "confirm": first["confirm"]})
        assert "was issued for submit on spec" in other, other
        listed = await ok(c, "list", {"name": "big-job"})
        assert listed["total"] == 0, listed
        placed = await ok(c, "submit", {"spec": big, "idempotency_key": key, "confirm": first["confirm"]})
        assert placed["workload"]["workload"]["name"] == "big-job", placed
        out["big"] = placed["workload"]["workload"]["id"]


async def other_submitter(mode, out):
    """A second submitter holding the first's confirmation id: refused."""
    if mode != "http":
        return  # one caller per stdio process; the book is per process
    async with connect(mode, env("TOKEN_OTHER")) as c:
        err = await refused(c, "cancel", {"id": out["still_queued"], "confirm": out["confirm_of_b"]})
        assert "was issued for" in err and "nothing was done" in err, err
        v = await ok(c, "list", {})
        assert isinstance(v["workloads"], list)


async def viewer(mode, out):
    async with connect(mode, env("TOKEN_VIEWER")) as c:
        names = {t.name for t in (await c.list_tools()).tools}
        assert names == ALL - MUTATING, names
        assert all(t.annotations.read_only_hint for t in (await c.list_tools()).tools)
        # A crafted call to a tool it is not offered: the API refuses it.
        err = await refused(c, "cancel", {"id": out["still_queued"]})
        assert "viewer" in err and "403" in err, err
        err = await refused(c, "submit", {"spec": open(env("SPEC_OK")).read(), "idempotency_key": "v-1"})
        assert "viewer" in err, err
        v = await ok(c, "status", {"id": out["still_queued"]})
        assert v["workload"]["state"] == "queued", v


async def capped(mode, out):
    async with connect(mode, env("TOKEN_CAPPED")) as c:
        spec = open(env("SPEC_GPU")).read()
        err = await refused(c, "submit", {"spec": spec, "idempotency_key": f"cap-{mode}"})
        out["capped"] = err
        assert "budget" in err and "GPU-h" in err and "nothing was submitted" in err, err


async def foreign_origin(mode, out):
    if mode != "http":
        return
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {
        "Authorization": f"Bearer {env('TOKEN_SUBMITTER')}",
        "Origin": "https://evil.example",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2025-06-18",
    }
    async with httpx.AsyncClient() as h:
        r = await h.post(env("CANOPY_MCP_URL"), json=body, headers=headers)
        assert r.status_code == 403, (r.status_code, r.text)
        out["foreign_origin"] = r.status_code
        no_token = dict(headers)
        del no_token["Authorization"], no_token["Origin"]
        r = await h.post(env("CANOPY_MCP_URL"), json=body, headers=no_token)
        assert r.status_code == 401, (r.status_code, r.text)


async def main():
    mode = sys.argv[1]
    assert mode in ("http", "stdio"), mode
    out = {"mode": mode}
    await submitter(mode, out)
    await other_submitter(mode, out)
    await viewer(mode, out)
    await capped(mode, out)
    await foreign_origin(mode, out)
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main())
