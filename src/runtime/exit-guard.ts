/**
 * What is still open when the process runs out of work. Device workers do not keep the process
 * alive (worker-handle.ts unrefs them), so a script that forgets `close()` reaches the end of its
 * event loop with a session open; here it is closed then (drain, then free), in the reverse of
 * the order things were opened, and stderr says so. `process.exit()` gives no such chance: its
 * workers stop with the process, and stderr says that instead.
 */

interface Held {
  /** What is open, for the message: "a session (cpu, model 'tiny', sharded)". */
  what: string;
  close(): Promise<void>;
}

const held = new Set<Held>();
let installed = false;

async function closeLeftOpen(): Promise<void> {
  for (const h of [...held].reverse()) {
    // Closing a session closes its runtime too: each thing is reported once.
    if (!held.has(h)) continue;
    held.delete(h);
    try {
      await h.close();
      process.stderr.write(
        `memra: ${h.what} was still open when the process ran out of work: drained and freed it (call close(), or open it with \`await using\`)\n`,
      );
    } catch (e) {
      process.stderr.write(
        `memra: ${h.what} was still open when the process ran out of work; closing it failed: ${(e as Error).message}\n`,
      );
    }
  }
}

function exitingWithHeld(): void {
  if (held.size === 0) return;
  const what = [...held].map((h) => h.what).join(', ');
  process.stderr.write(
    `memra: the process exited with ${what} open: not drained; its device workers stop with the process\n`,
  );
}

/**
 * Its own function, not inline in holdOpen: a listener made there shares holdOpen's scope, and
 * with it the first `h`, so the first `Session` and `Runtime` ever opened stayed reachable from
 * `process` for good (the soak's heap snapshots found them).
 */
function install(): void {
  if (installed) return;
  installed = true;
  // 'beforeExit' comes again once this close's own work is done; by then nothing is held.
  process.on('beforeExit', () => {
    if (held.size > 0) void closeLeftOpen();
  });
  process.on('exit', exitingWithHeld);
}

/** Hold `what` open until the returned release is called (by its close). */
export function holdOpen(what: string, close: () => Promise<void>): () => void {
  install();
  const h: Held = { what, close };
  held.add(h);
  return () => {
    held.delete(h);
  };
}
