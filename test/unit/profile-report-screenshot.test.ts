/**
 * The HTML report as a browser draws it: headless Chromium screenshots the page, and the PNG must
 * be the requested size and not one flat colour (a page that failed to lay out, or a blank tab).
 *
 * Where no Chromium is on PATH the screenshot test skips and says so in the log; the PNG reader
 * it relies on is checked everywhere, against PNGs written here with every row filter.
 */
import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { accessSync, constants, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { crc32, deflateSync, inflateSync } from 'node:zlib';
import { renderHtmlReport } from '../../src/profile/html-report.js';
import { syntheticProfile } from '../support/synthetic-profile.js';

const BROWSERS = ['chromium', 'chromium-browser', 'google-chrome'];
const WIDTH = 1200,
  HEIGHT = 2000;

describe('profile report in headless Chromium', function () {
  this.timeout(120_000);

  it('renders to a screenshot of the requested size that is not one flat colour', async function () {
    const browser = findOnPath(BROWSERS);
    if (!browser) {
      console.log(
        `      SKIPPED: none of ${BROWSERS.join(', ')} is on PATH, so the HTML report was not rendered or screenshotted`,
      );
      this.skip();
    }
    const dir = mkdtempSync(join(tmpdir(), 'memra-report-'));
    try {
      const report = join(dir, 'report.html'),
        png = join(dir, 'report.png');
      writeFileSync(
        report,
        renderHtmlReport(
          syntheticProfile({ layers: 12, steps: 60, transport: ({ layer }) => (layer < 6 ? 'll' : 'nccl') }),
        ),
      );
      const args = [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--hide-scrollbars',
        `--user-data-dir=${join(dir, 'profile')}`,
        `--screenshot=${png}`,
        `--window-size=${WIDTH},${HEIGHT}`,
        `file://${report}`,
      ];
      const run = await new Promise<{ error: Error | null; stderr: string }>((resolve) => {
        execFile(browser!, args, { timeout: 90_000 }, (error, _stdout, stderr) =>
          resolve({ error, stderr: String(stderr) }),
        );
      });
      assert.ok(
        existsSync(png),
        `${browser} wrote no screenshot (${run.error?.message ?? 'exit 0'}): ${run.stderr.slice(-2000)}`,
      );
      const image = readPng(readFileSync(png));
      assert.deepEqual([image.width, image.height], [WIDTH, HEIGHT], 'the screenshot has the requested window size');
      assert.ok(!isOneColour(image), 'the screenshot is not a single flat colour');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('(the PNG reader) undoes every row filter, and tells a drawn image from a flat one', () => {
    const w = 37,
      h = 23;
    const drawn = new Uint8Array(w * h * 4).map((_, i) => (i * 7 + (i >> 5) * 13) & 0xff);
    const flat = new Uint8Array(w * h * 4).fill(0xee);
    for (let filter = 0; filter <= 4; filter++) {
      const back = readPng(writePng(w, h, drawn, filter));
      assert.deepEqual([back.width, back.height, back.channels], [w, h, 4]);
      assert.deepEqual(back.pixels, drawn, `filter ${filter}`);
      assert.equal(isOneColour(back), false);
      assert.equal(isOneColour(readPng(writePng(w, h, flat, filter))), true, `flat, filter ${filter}`);
    }
    // One pixel off the flat colour is enough to count as drawn.
    const dot = flat.slice();
    dot[(11 * w + 30) * 4 + 2] = 0;
    assert.equal(isOneColour(readPng(writePng(w, h, dot, 4))), false);
    const good = writePng(w, h, drawn, 0);
    assert.throws(() => readPng(Buffer.from('GIF89a........')), /not a PNG: bad signature/);
    const corrupt = Buffer.from(good);
    corrupt[20]! ^= 1; // inside IHDR's data
    assert.throws(() => readPng(corrupt), /IHDR chunk fails its CRC/);
  });
});

function findOnPath(names: string[]): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter).filter(Boolean)) {
    for (const name of names) {
      const file = join(dir, name);
      try {
        accessSync(file, constants.X_OK);
        return file;
      } catch {
        /* not here */
      }
    }
  }
  return undefined;
}

interface Png {
  width: number;
  height: number;
  channels: number;
  pixels: Uint8Array;
}

const SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
/** Channels per colour type, 8-bit only: grey, RGB, grey + alpha, RGBA (what a screenshot is). */
const CHANNELS: Record<number, number> = { 0: 1, 2: 3, 4: 2, 6: 4 };

/** Just enough PNG: checks the signature and chunk CRCs, reads IHDR, inflates IDAT and undoes the row filters. */
function readPng(buf: Buffer): Png {
  if (buf.length < 8 || !buf.subarray(0, 8).equals(SIGNATURE)) throw new Error('not a PNG: bad signature');
  let at = 8,
    ihdr: Buffer | undefined;
  const idat: Buffer[] = [];
  while (at + 12 <= buf.length) {
    const len = buf.readUInt32BE(at),
      type = buf.toString('latin1', at + 4, at + 8),
      data = buf.subarray(at + 8, at + 8 + len);
    if (at + 12 + len > buf.length) throw new Error(`PNG: ${type} chunk runs past the end of the file`);
    if (crc32(buf.subarray(at + 4, at + 8 + len)) !== buf.readUInt32BE(at + 8 + len))
      throw new Error(`PNG: ${type} chunk fails its CRC`);
    if (type === 'IHDR') ihdr = data;
    else if (type === 'IDAT') idat.push(data);
    else if (type === 'IEND') break;
    at += 12 + len;
  }
  if (ihdr?.length !== 13) throw new Error('PNG: no IHDR chunk of 13 bytes');
  const width = ihdr.readUInt32BE(0),
    height = ihdr.readUInt32BE(4),
    depth = ihdr[8]!,
    type = ihdr[9]!,
    interlace = ihdr[12]!;
  const channels = CHANNELS[type];
  if (depth !== 8 || channels === undefined || interlace !== 0)
    throw new Error(
      `PNG: bit depth ${depth}, colour type ${type}, interlace ${interlace} not read here (8-bit, non-interlaced grey/RGB/RGBA only)`,
    );
  const raw = inflateSync(Buffer.concat(idat)),
    stride = width * channels;
  if (raw.length !== height * (stride + 1))
    throw new Error(`PNG: ${raw.length} bytes of image data, expected ${height * (stride + 1)} for ${width}×${height}`);
  const pixels = new Uint8Array(height * stride);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)]!,
      row = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    for (let i = 0; i < stride; i++) {
      const a = i >= channels ? pixels[y * stride + i - channels]! : 0;
      const b = y > 0 ? pixels[(y - 1) * stride + i]! : 0;
      const c = y > 0 && i >= channels ? pixels[(y - 1) * stride + i - channels]! : 0;
      pixels[y * stride + i] = (row[i]! + predict(filter, a, b, c, y)) & 0xff;
    }
  }
  return { width, height, channels, pixels };
}

function predict(filter: number, a: number, b: number, c: number, y: number): number {
  switch (filter) {
    case 0:
      return 0;
    case 1:
      return a;
    case 2:
      return b;
    case 3:
      return (a + b) >> 1;
    case 4:
      return paeth(a, b, c);
    default:
      throw new Error(`PNG: row ${y} has filter type ${filter}, not 0 to 4`);
  }
}

function paeth(a: number, b: number, c: number): number {
  const p = a + b - c,
    pa = Math.abs(p - a),
    pb = Math.abs(p - b),
    pc = Math.abs(p - c);
  return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

function isOneColour(png: Png): boolean {
  const { pixels, channels } = png;
  for (let i = channels; i < pixels.length; i++) if (pixels[i] !== pixels[i % channels]) return false;
  return true;
}

/** An 8-bit RGBA PNG with every row filtered by `filter`: the reader's counterpart, for its own test. */
function writePng(width: number, height: number, rgba: Uint8Array, filter: number): Buffer {
  const stride = width * 4,
    raw = Buffer.alloc(height * (stride + 1));
  for (let y = 0; y < height; y++) {
    raw[y * (stride + 1)] = filter;
    for (let i = 0; i < stride; i++) {
      const a = i >= 4 ? rgba[y * stride + i - 4]! : 0,
        b = y > 0 ? rgba[(y - 1) * stride + i]! : 0;
      const c = y > 0 && i >= 4 ? rgba[(y - 1) * stride + i - 4]! : 0;
      raw[y * (stride + 1) + 1 + i] = (rgba[y * stride + i]! - predict(filter, a, b, c, y)) & 0xff;
    }
  }
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr.set([8, 6, 0, 0, 0], 8);
  return Buffer.concat([
    SIGNATURE,
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(raw)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

function chunk(type: string, data: Buffer): Buffer {
  const out = Buffer.alloc(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  out.write(type, 4, 'latin1');
  data.copy(out, 8);
  out.writeUInt32BE(crc32(out.subarray(4, 8 + data.length)), 8 + data.length);
  return out;
}
