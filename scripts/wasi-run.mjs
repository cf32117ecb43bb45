// cargo runner for wasm32-wasip1 (see scripts/setup-cross.sh): node scripts/wasi-run.mjs <file.wasm> [args...]
// Runs the module under node's WASI with the working directory and / preopened (tests read
// fixtures by absolute path); exit code = the module's.
//
// V8's fast API calls stay off: node's WASI functions may allocate inside a fast call,
// which can start a garbage collection there and corrupt the heap (nodejs/node#46777).
// A module that grows its memory by a few hundred MiB then makes that collection likely:
// node 20 died of SIGSEGV/SIGBUS at the module's exit (the B-past-L3 GEMM tests on a
// 105 MiB L3; a Rust program that allocates 300 MiB and exits does it too). The flag is
// set before the module is compiled, so nothing calls WASI through the fast path.
import { setFlagsFromString } from 'node:v8';
setFlagsFromString('--no-turbo-fast-api-calls');
import { readFileSync } from 'node:fs';
import { WASI } from 'node:wasi';
import { basename } from 'node:path';
const [file, ...args] = process.argv.slice(2);
const wasi = new WASI({ version: 'preview1', args: [basename(file), ...args], env: process.env,
                        preopens: { '.': process.cwd(), '/': '/' }, returnOnExit: true });
const mod = await WebAssembly.compile(readFileSync(file));
const inst = await WebAssembly.instantiate(mod, wasi.getImportObject());
process.exitCode = wasi.start(inst);
