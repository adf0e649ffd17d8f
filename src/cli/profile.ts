/**
 * `memra profile`: a decode run with every join profiled, written three ways into one folder:
 * `profile.json` (raw samples and the aggregate), `trace.json` (Chrome trace events: open it in
 * Perfetto, one track per rank's stream and one for the main thread) and `report.html` (one
 * self-contained page of SVG plots).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { DECODE_OPTIONS, decode, decodeOptions, printDecode, type DecodeOptions, type DecodeReport } from './decode.js';
import { UsageError, defineCommand } from './options.js';
import { describeMachine } from './machine.js';
import { ProfileRecorder } from '../profile/recorder.js';
import { documentToJson, profileDocument } from '../profile/json-export.js';
import { chromeTraceJson } from '../profile/chrome-trace.js';
import { renderHtmlReport } from '../profile/html-report.js';
import type { Profile } from '../profile/profile-data.js';

export interface ProfileRun {
  report: DecodeReport;
  profile: Profile;
  files: string[];
}

export const profileCommand = defineCommand(
  {
    name: 'profile',
    summary: 'a decode with every join profiled, written as JSON, a Chrome trace and an HTML report',
    description:
      'A decode run (the options of memra decode) with every join profiled, written into one folder: ' +
      'profile.json (raw samples, per-(layer, hop, transport) histograms), trace.json (Chrome trace events: open it in Perfetto) and report.html (self-contained SVG plots).',
    options: {
      ...DECODE_OPTIONS,
      out: {
        type: 'path',
        value: 'DIR',
        default: 'memra-profile',
        help: 'the folder the three files are written into',
      },
    },
  },
  async (v) => {
    const { json, ...o } = decodeOptions(v);
    const r = await profile(o, v.out);
    if (json) console.log(JSON.stringify({ ...r.report, files: r.files }));
    else printProfile(r);
  },
);

export async function profile(
  o: Omit<DecodeOptions, 'profile' | 'onStep' | 'json'>,
  outDir: string,
): Promise<ProfileRun> {
  // Before the run, not after it: the session takes exactly the layout it is given (on one GPU,
  // the sharded layout needs --loopback, and the session says so).
  if (o.layout === 'unsharded')
    throw new UsageError('an unsharded run has no joins to profile; use --layout sharded', 'ERR_INVALID_ARG_VALUE');
  const recorder = new ProfileRecorder();
  const report = await decode({
    ...o,
    layout: 'sharded',
    json: false,
    profile: true,
    onStep: (rows, out) => recorder.record(rows, out),
  });
  const machine = describeMachine(report.backend, report.loopback);
  const p = await recorder.finish(
    {
      preset: report.preset,
      layers: report.layers,
      backend: report.backend,
      machine:
        machine.gpus.length > 0
          ? `${machine.gpus.length}x ${machine.gpus[0]!.name}${report.loopback ? ', loopback (both ranks on one device: not two-GPU figures)' : ''}`
          : `cpu reference (${machine.cores} cores)`,
      date: new Date().toISOString(),
      config: report.config,
    },
    report.epGraph,
  );
  const dir = resolve(outDir);
  mkdirSync(dir, { recursive: true });
  // One aggregate for both the JSON and the HTML: the two cannot disagree.
  const doc = profileDocument(p);
  const files = [
    [join(dir, 'profile.json'), documentToJson(doc, 1)],
    [join(dir, 'trace.json'), chromeTraceJson(p)],
    [join(dir, 'report.html'), renderHtmlReport(p, { aggregate: doc.aggregate })],
  ] as const;
  for (const [path, body] of files) writeFileSync(path, body);
  return { report, profile: p, files: files.map(([path]) => path) };
}

export function printProfile(r: ProfileRun): void {
  printDecode(r.report);
  console.log(`profiled ${r.profile.joins.length} joins over ${r.profile.steps.length} steps`);
  for (const f of r.files) console.log(`wrote ${f}`);
}
