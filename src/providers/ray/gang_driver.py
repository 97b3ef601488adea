# Canopy's gang driver for Ray: the entrypoint of a Ray job that runs one
# launcher per node of a gang. Embedded in the canopy binary and written
# next to the attempt's files; run as `python canopy_gang.py gang.json`.
#
# 1. A STRICT_SPREAD placement group, one bundle per rank (each bundle
#    pinned to the node Canopy chose when it names one), waited for at
#    most `placement_timeout_s`: if Ray cannot place it, nothing runs and
#    the driver ends with a CANOPY-GANG-UNPLACED line.
# 2. One Rank actor per bundle. Each reports its node's address
#    (ray.util.get_node_ip_address()); rank 0's is MASTER_ADDR. The
#    launcher environment Canopy computed names addresses as
#    @CANOPY_ADDR_<i>@, replaced here; CANOPY_RAY_NODE_IP and
#    CANOPY_RAY_NODE_ID say where Ray put the rank.
# 3. Each actor runs the workload's argv in a subprocess (its own session,
#    killed if the actor dies) with that environment, the secrets (read
#    from the attempt's secret file, which is removed once every rank has
#    read it) and Ray's CUDA_VISIBLE_DEVICES.
#    If a rank's actor does not come up, or its process cannot be started
#    on its node (program missing there, no fork...), the ranks that did
#    start are stopped (SIGTERM, then SIGKILL after `stop_grace_s`) and the
#    driver prints a CANOPY-GANG-END line naming that rank with `unstarted`
#    and why, then exits non-zero: the gang is rolled back whole.
# 4. The driver prints every rank's output as it comes. When a rank exits
#    non-zero (or its actor dies) the others are stopped (SIGTERM, then
#    SIGKILL after `stop_grace_s`) and the driver prints one
#    CANOPY-GANG-END line naming the rank, its node and how it ended, then
#    exits non-zero. SIGTERM to the driver (Ray's job stop) stops every
#    rank the same way.
import json
import os
import signal
import subprocess
import sys
import threading
import time

import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

END_MARK = "CANOPY-GANG-END"
UNPLACED_MARK = "CANOPY-GANG-UNPLACED"


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


# One call at a time, on the actor's main thread: PR_SET_PDEATHSIG is
# tied to the thread that forked, which then lives as long as the actor.
@ray.remote
class Rank:
    def __init__(self):
        self.proc = None
        self.lines = []
        self.lock = threading.Lock()
        self.reader = None

    def where(self):
        ctx = ray.get_runtime_context()
        return ray.util.get_node_ip_address(), ctx.get_node_id()

    def start(self, argv, env, cwd, secret_file, secret_names):
        full = dict(os.environ)
        full.update(env)
        if secret_file and secret_names:
            # The file is shell (export NAME='value'); the shell reads it.
            out = subprocess.run(
                ["sh", "-c", '. "$1" && env -0', "sh", secret_file],
                capture_output=True,
                check=False,
            )
            for item in out.stdout.split(b"\0"):
                name, _, value = item.decode("utf-8", "surrogateescape").partition("=")
                if name in secret_names:
                    full[name] = value
        try:
            os.makedirs(cwd, exist_ok=True)
        except OSError:
            pass

        def on_fork():
            os.setsid()
            try:
                import ctypes

                ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
            except Exception:
                pass

        try:
            self.proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=full,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                preexec_fn=on_fork,
            )
        except (OSError, subprocess.SubprocessError) as e:
            # Not there on this node, not executable, no working
            # directory, no fork: this rank did not start.
            return {"error": "%s: %s" % (argv[0], getattr(e, "strerror", None) or e)}
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        return {"pid": self.proc.pid}

    def _read(self):
        for line in iter(self.proc.stdout.readline, b""):
            with self.lock:
                self.lines.append(line)

    def poll(self, since):
        """New output from line `since`, and the wait status once the
        process has ended and its output is all read."""
        done = self.proc is not None and self.proc.poll() is not None and not self.reader.is_alive()
        with self.lock:
            new = self.lines[since:]
        return new, (self.proc.returncode if done else None)

    def stop(self, grace):
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.time() + grace
        while time.time() < deadline and self.proc.poll() is None:
            time.sleep(0.1)
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def first_line(e):
    """The first line of an exception's text (Ray's carry tracebacks)."""
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def each(refs, timeout=None):
    """Every ref's value, or the exception it raised, in order."""
    out = []
    for ref in refs:
        try:
            out.append((ray.get(ref, timeout=timeout), None))
        except Exception as e:  # the actor or its node is gone
            out.append((None, e))
    return out


def how(returncode):
    if returncode is None:
        return "lost"
    if returncode < 0:
        return "signal=%d" % -returncode
    return "exit=%d" % returncode


def main():
    with open(sys.argv[1]) as f:
        cfg = json.load(f)
    nodes = cfg["nodes"]
    n = len(nodes)
    ray.init(address="auto", log_to_driver=False)
    pg = placement_group(cfg["bundles"], strategy="STRICT_SPREAD", name=cfg["token"])
    if not pg.wait(cfg["placement_timeout_s"]):
        say(
            "%s ranks=%d after=%ss: Ray could not place one bundle per node (STRICT_SPREAD %s)"
            % (UNPLACED_MARK, n, cfg["placement_timeout_s"], json.dumps(cfg["bundles"]))
        )
        remove_placement_group(pg)
        sys.exit(75)
    actors = []
    for i, b in enumerate(cfg["bundles"]):
        opts = dict(
            num_cpus=b.get("CPU", 0),
            num_gpus=b.get("GPU", 0),
            resources={k: v for k, v in b.items() if k not in ("CPU", "GPU")},
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                placement_group=pg, placement_group_bundle_index=i
            ),
        )
        actors.append(Rank.options(**opts).remote())
    grace = cfg["stop_grace_s"]
    stopping = {"now": False}

    def stop_all(except_rank=None):
        refs = [a.stop.remote(grace) for i, a in enumerate(actors) if i != except_rank]
        # Waits for every stop (a dead actor's fails at once, which must
        # not cut the wait for the others short).
        try:
            ray.wait(refs, num_returns=len(refs), timeout=grace + 10)
        except Exception:
            pass

    def not_started(rank, ip, node_id, why):
        """Rank `rank` could not start: every rank that did is stopped
        (SIGTERM, grace, SIGKILL) and the gang ends as that rank's."""
        stop_all(except_rank=rank)
        for i, (lines, _) in enumerate(each([a.poll.remote(0) for a in actors], timeout=10)):
            for line in (lines or []) if i != rank else []:
                sys.stdout.write(line.decode("utf-8", "replace"))
        say(
            "%s rank=%d node=%s ip=%s node_id=%s unstarted %s"
            % (END_MARK, rank, nodes[rank], ip, node_id, " ".join(why.split()))
        )
        remove_placement_group(pg)
        sys.exit(1)

    # Each rank's actor must come up on its node (its worker started, its
    # runtime environment set up) before any workload starts.
    where = []
    for i, (w, e) in enumerate(each([a.where.remote() for a in actors])):
        if e is not None:
            not_started(i, "-", "-", "its Ray actor did not start: %s" % first_line(e))
        where.append(w)

    def on_term(signum, frame):
        stopping["now"] = True

    signal.signal(signal.SIGTERM, on_term)
    envs = []
    for rank in range(n):
        env = {}
        for k, v in cfg["envs"][rank].items():
            for i, (ip, _) in enumerate(where):
                v = v.replace("@CANOPY_ADDR_%d@" % i, ip)
            env[k] = v
        # Where Ray put this rank, for its logs.
        env["CANOPY_RAY_NODE_IP"], env["CANOPY_RAY_NODE_ID"] = where[rank]
        envs.append(env)
    started = each(
        [
            a.start.remote(cfg["argv"], envs[i], cfg["workdir"], cfg.get("secret_file"), cfg.get("secret_names", []))
            for i, a in enumerate(actors)
        ]
    )
    if cfg.get("secret_file"):
        try:
            os.remove(cfg["secret_file"])
        except OSError:
            pass
    # Not every rank started: those that did are stopped, and the gang is
    # rolled back as the first rank that did not start.
    for i, (r, e) in enumerate(started):
        if e is not None or "error" in (r or {}):
            why = "could not start %s" % (r["error"] if e is None else first_line(e))
            not_started(i, where[i][0], where[i][1], why)
    offsets = [0] * n
    ended = [None] * n
    failed = None
    while failed is None and any(e is None for e in ended):
        if stopping["now"]:
            stop_all()
            say("%s rank=-1 stopped: the job was stopped" % END_MARK)
            sys.exit(143)
        for i, a in enumerate(actors):
            if ended[i] is not None:
                continue
            try:
                lines, rc = ray.get(a.poll.remote(offsets[i]), timeout=60)
            except Exception as e:  # the actor or its node is gone
                failed = (i, None, str(e).splitlines()[0] if str(e) else type(e).__name__)
                break
            offsets[i] += len(lines)
            for line in lines:
                sys.stdout.write(line.decode("utf-8", "replace"))
            sys.stdout.flush()
            if rc is not None:
                ended[i] = rc
                if rc != 0:
                    failed = (i, rc, "")
                    break
        else:
            time.sleep(0.2)
    if failed is not None:
        rank, rc, why = failed
        stop_all(except_rank=rank)
        # What the others printed while stopping.
        for i, a in enumerate(actors):
            if i == rank:
                continue
            try:
                lines, _ = ray.get(a.poll.remote(offsets[i]), timeout=10)
                for line in lines:
                    sys.stdout.write(line.decode("utf-8", "replace"))
            except Exception:
                pass
        ip, node_id = where[rank]
        say(
            "%s rank=%d node=%s ip=%s node_id=%s %s%s"
            % (END_MARK, rank, nodes[rank], ip, node_id, how(rc), (" " + why) if why else "")
        )
        sys.exit(rc if rc is not None and 0 < rc < 256 else 1)
    remove_placement_group(pg)


if __name__ == "__main__":
    main()
