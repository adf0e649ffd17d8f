/**
 * The stylesheet the self-contained reports share (the profile report and the benchmark page),
 * inlined into each page so it opens from a file or an attachment with nothing else.
 */
export const PAGE_STYLE = `
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1a202c; background: #fff; margin: 24px; max-width: 1140px; }
h1 { font-size: 22px; margin: 0 0 16px; }
h2 { font-size: 18px; margin: 28px 0 8px; border-bottom: 1px solid #cbd5e0; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 18px 0 6px; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { padding: 2px 10px 2px 0; text-align: left; vertical-align: top; }
td.num, th.num { text-align: right; }
table.rows th { border-bottom: 1px solid #cbd5e0; }
svg { display: block; margin: 6px 0 12px; }
svg text { font: 12px system-ui, sans-serif; fill: #1a202c; }
svg .axis { stroke: #4a5568; stroke-width: 1; }
svg .grid { stroke: #e2e8f0; stroke-width: 1; }
svg .muted { fill: #718096; }
.note { color: #4a5568; font-size: 13px; }
`;

/** A whole self-contained page: the shared head (with `style`, PAGE_STYLE plus the page's own) and `body`. */
export function htmlPage(title: string, style: string, body: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title>
<style>${style}</style>
</head>
<body>
${body}
</body>
</html>
`;
}
