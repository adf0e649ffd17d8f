/** Fresh test inputs. Integer-valued floats keep every sum exact, so results compare bit for bit. */
import { randomFillSync, randomInt } from 'node:crypto';

export function randomBytes(n: number): Uint8Array {
  return randomFillSync(new Uint8Array(n));
}

/** `n` f32 integers in [-max, max], never all zero. */
export function randomF32Ints(n: number, max: number): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = randomInt(-max, max + 1);
  if (n > 0 && out.every((v) => v === 0)) out[0] = 1;
  return out;
}

/** `n` bf16 bit patterns of random sign and mantissa in ±[0.5, 1): finite and never zero. */
export function randomBf16(n: number): Uint16Array {
  const out = randomFillSync(new Uint16Array(n));
  for (let i = 0; i < n; i++) out[i] = (out[i]! & 0x807f) | 0x3f00;
  return out;
}
