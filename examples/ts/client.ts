// A Canopy API client in TypeScript on Node's built-in fetch and crypto:
// no runtime dependencies (TypeScript and @types/node only to compile).
//
// Submits a workload spec (TOML) to a Canopy server, follows the workload
// until it ends, prints its stdout log, lists its artifacts and downloads
// the first file among them, checking its SHA-256.
//
//   export CANOPY_SERVER=http://127.0.0.1:7878     # what the CLI reads too
//   export CANOPY_TOKEN=canopy_...
//   npx tsc -p examples/ts && node examples/ts/dist/client.js assets/specs/hello.toml --out ./downloads
//
// The submit carries an Idempotency-Key (a fresh one unless --key is
// given): run again with the same key and spec, the server returns the
// same workload instead of running it twice.
//
// A webhook receiver checks each delivery's signature with
// verifyWebhook(), or from the shell:
//
//   CANOPY_WEBHOOK_SECRET=... node examples/ts/dist/client.js verify-webhook "$HEADER" body.json
//
// Exit status: 0 when the workload succeeded (or the signature holds), 1
// when it failed or was cancelled (or the signature does not hold), 2
// when the server refused a request or could not be reached.

import { createHash, createHmac, randomUUID, timingSafeEqual } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";

const FINAL = new Set(["succeeded", "failed", "cancelled"]);

interface WorkloadRecord {
  id: string;
  state: string;
  reason?: string | null;
  submitted_by?: string;
}
interface WorkloadView {
  workload: WorkloadRecord;
}
interface Artifact {
  attempt: number;
  name: string;
  bytes: number;
  sha256: string;
  download?: string | null;
}
interface Problem {
  file?: string;
  line?: number;
  col?: number;
  message?: string;
}

/** The server's error shape: {"error": {"code", "message", "problems"?}}. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly problems: Problem[] = [],
  ) {
    super(`${status} ${code}: ${message}`);
  }
}

/**
 * Whether a delivery's Canopy-Signature header (`t=<unix s>,v1=<hex>`)
 * signs `body` under `secret`, made at most `toleranceS` seconds from
 * `nowS`: HMAC-SHA256 over `"<t>." + body`; several v1 values (a secret
 * being rotated) may be given; compared in constant time.
 */
export function verifyWebhook(
  header: string,
  secret: string | Buffer,
  body: Buffer,
  nowS: number = Date.now() / 1000,
  toleranceS = 300,
): boolean {
  let t: string | undefined;
  const sigs: string[] = [];
  for (const part of header.split(",")) {
    const [k, v = ""] = part.trim().split("=", 2);
    if (k === "t") t = v;
    else if (k === "v1") sigs.push(v);
  }
  if (t === undefined || !/^-?\d+$/.test(t) || sigs.length === 0) return false;
  if (Math.abs(nowS - Number(t)) > toleranceS) return false;
  const want = createHmac("sha256", secret).update(`${t}.`).update(body).digest();
  return sigs.some((s) => {
    const got = Buffer.from(s, "hex");
    return got.length === want.length && timingSafeEqual(got, want);
  });
}

export class Canopy {
  constructor(
    readonly base: string,
    readonly token?: string,
  ) {
    this.base = base.replace(/\/+$/, "");
  }

  /** Sends one request; the response, or an ApiError. */
  async request(method: string, path: string, body?: string, headers: Record<string, string> = {}): Promise<Response> {
    const h: Record<string, string> = { ...headers };
    if (this.token) h["Authorization"] = `Bearer ${this.token}`;
    let res: Response;
    try {
      res = await fetch(this.base + path, { method, body, headers: h, signal: AbortSignal.timeout(30_000) });
    } catch (e) {
      throw new ApiError(0, "unreachable", `no Canopy server answers at ${this.base}: ${(e as Error).message}`);
    }
    if (!res.ok) {
      const raw = await res.text();
      let err: { code?: string; message?: string; problems?: Problem[] } = {};
      try {
        err = JSON.parse(raw).error ?? {};
      } catch {
        err = { code: "unknown", message: raw || res.statusText };
      }
      throw new ApiError(res.status, err.code ?? "unknown", err.message ?? res.statusText, err.problems ?? []);
    }
    return res;
  }

  async json<T>(method: string, path: string): Promise<T> {
    return (await (await this.request(method, path)).json()) as T;
  }

  async submit(specToml: string, key: string): Promise<{ status: number; view: WorkloadView }> {
    const res = await this.request("POST", "/v1/workloads", specToml, {
      "Content-Type": "application/toml",
      "Idempotency-Key": key,
    });
    return { status: res.status, view: (await res.json()) as WorkloadView };
  }

  /** Polls until the workload is final; prints each new state. */
  async wait(id: string): Promise<WorkloadView> {
    let last: string | undefined;
    let poll = 250;
    for (;;) {
      const w = await this.json<WorkloadView>("GET", `/v1/workloads/${id}`);
      if (w.workload.state !== last) {
        last = w.workload.state;
        const why = w.workload.reason ? ` (${w.workload.reason})` : "";
        process.stderr.write(`${id}: ${last}${why}\n`);
      }
      if (FINAL.has(last)) return w;
      await new Promise((r) => setTimeout(r, poll));
      poll = Math.min(poll * 1.5, 2_000);
    }
  }

  async log(id: string, stream = "stdout"): Promise<string> {
    return (await this.request("GET", `/v1/workloads/${id}/logs?stream=${stream}`)).text();
  }

  async artifacts(id: string): Promise<Artifact[]> {
    return this.json<Artifact[]>("GET", `/v1/workloads/${id}/artifacts`);
  }

  /** Downloads one file artifact into outDir; checks its SHA-256. */
  async download(a: Artifact, outDir: string): Promise<string> {
    const data = Buffer.from(await (await this.request("GET", a.download ?? "")).arrayBuffer());
    const digest = createHash("sha256").update(data).digest("hex");
    if (digest !== a.sha256) throw new ApiError(0, "corrupt", `${a.name}: sha256 ${digest}, expected ${a.sha256}`);
    mkdirSync(outDir, { recursive: true });
    // The name comes from the server: keep only its last component.
    const path = join(outDir, basename(a.name) || "artifact");
    writeFileSync(path, data);
    return path;
  }
}

function verifyMain(args: string[]): number {
  const [header, bodyFile] = args;
  const secret = process.env.CANOPY_WEBHOOK_SECRET;
  if (!header || !bodyFile) {
    process.stderr.write("usage: client.js verify-webhook HEADER BODY_FILE\n");
    return 2;
  }
  if (!secret) {
    process.stderr.write("error: set CANOPY_WEBHOOK_SECRET to the secret the server signs with\n");
    return 2;
  }
  if (verifyWebhook(header, secret, readFileSync(bodyFile))) {
    process.stdout.write("signature ok\n");
    return 0;
  }
  process.stderr.write("signature does not verify\n");
  return 1;
}

async function main(argv: string[]): Promise<number> {
  if (argv[0] === "verify-webhook") return verifyMain(argv.slice(1));
  let spec: string | undefined;
  let key = `client-ts-${randomUUID()}`;
  let out = ".";
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--key") key = argv[++i] ?? key;
    else if (argv[i] === "--out") out = argv[++i] ?? out;
    else spec = argv[i];
  }
  if (!spec) {
    process.stderr.write("usage: client.js SPEC.toml [--key KEY] [--out DIR]\n");
    return 2;
  }
  const base = process.env.CANOPY_SERVER;
  if (!base) {
    process.stderr.write("error: set CANOPY_SERVER (e.g. http://127.0.0.1:7878) and CANOPY_TOKEN\n");
    return 2;
  }
  const api = new Canopy(base, process.env.CANOPY_TOKEN);
  const text = spec === "-" ? readFileSync(0, "utf8") : readFileSync(spec, "utf8");
  try {
    const { status, view } = await api.submit(text, key);
    const id = view.workload.id;
    const again = status === 200 ? " (already submitted with this key)" : "";
    console.log(`submitted ${id} as ${view.workload.submitted_by}${again}`);
    const state = (await api.wait(id)).workload.state;
    console.log(`${id} ${state}`);
    console.log("--- stdout ---");
    process.stdout.write(await api.log(id));
    console.log("--- artifacts ---");
    const arts = await api.artifacts(id);
    for (const a of arts) console.log(`${a.attempt}  ${a.name}  ${a.bytes} bytes  sha256 ${a.sha256.slice(0, 12)}`);
    if (arts.length === 0) console.log("(none)");
    const first = arts.find((a) => a.download);
    if (first) console.log(`downloaded ${await api.download(first, out)}`);
    return state === "succeeded" ? 0 : 1;
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    process.stderr.write(`error: ${e.message}\n`);
    for (const d of e.problems) process.stderr.write(`  ${d.file}:${d.line}:${d.col}: ${d.message}\n`);
    return 2;
  }
}

main(process.argv.slice(2)).then((code) => process.exit(code));
