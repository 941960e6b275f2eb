#!/usr/bin/env node
// Builds the live page (src/web/page) into dist/page: type-checks it against the DOM (its own
// tsconfig), bundles it with esbuild into one app.js and one app.css, and copies index.html.
// `npm run build` runs it after tsc; the control plane serves dist/page at /ui/ (src/web/page-routes.ts).
//
// It does nothing when every output is newer than the page's sources and package-lock.json
// (`--force` builds anyway), so set-up's second run stays fast.
import { spawnSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, readdirSync, statSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const src = join(root, 'src', 'web', 'page')
const out = join(root, 'dist', 'page')

const OUTPUTS = ['index.html', 'app.js', 'app.css'].map((f) => join(out, f))
const inputs = [...readdirSync(src).map((f) => join(src, f)), join(root, 'package-lock.json'), join(root, 'scripts', 'build-page.mjs')]
const newest = Math.max(...inputs.map((f) => statSync(f).mtimeMs))
if (!process.argv.includes('--force') && OUTPUTS.every((f) => existsSync(f) && statSync(f).mtimeMs >= newest)) process.exit(0)

const tsc = spawnSync(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(src, 'tsconfig.json')], { stdio: 'inherit' })
if (tsc.status !== 0) process.exit(tsc.status ?? 1)

mkdirSync(out, { recursive: true })
const { build } = await import('esbuild')
await build({
  entryPoints: { app: join(src, 'main.ts') },
  outdir: out,
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: ['chrome110', 'firefox110', 'safari16'],
  minify: true,
  legalComments: 'linked',
  logLevel: 'warning'
})
copyFileSync(join(src, 'index.html'), join(out, 'index.html'))
