// cargo runner for wasm32-wasip1 (see scripts/setup-cross.sh): node scripts/wasi-run.mjs <file.wasm> [args...]
// Runs the module under node's WASI with the working directory and / preopened (tests read
// fixtures by absolute path); exit code = the module's.
import { readFileSync } from 'node:fs';
import { WASI } from 'node:wasi';
import { basename } from 'node:path';
const [file, ...args] = process.argv.slice(2);
const wasi = new WASI({ version: 'preview1', args: [basename(file), ...args], env: process.env,
                        preopens: { '.': process.cwd(), '/': '/' }, returnOnExit: true });
const mod = await WebAssembly.compile(readFileSync(file));
const inst = await WebAssembly.instantiate(mod, wasi.getImportObject());
process.exitCode = wasi.start(inst);
