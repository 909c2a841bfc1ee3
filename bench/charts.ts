// Minimal SVG line charts (no dependencies): one series per system, log-scaled x when asked.

export interface Series {
  name: string;
  points: [number, number][];
}

const colors = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c"];

export function lineChart(options: {
  title: string;
  xLabel: string;
  yLabel: string;
  series: Series[];
  logX?: boolean;
}): string {
  const width = 640;
  const height = 360;
  const m = { left: 70, right: 20, top: 40, bottom: 50 };
  const xs = options.series.flatMap((s) => s.points.map((p) => p[0]));
  const ys = options.series.flatMap((s) => s.points.map((p) => p[1]));
  const fx = (x: number) => (options.logX ? Math.log10(x) : x);
  const [x0, x1] = [Math.min(...xs.map(fx)), Math.max(...xs.map(fx))];
  const y1 = Math.max(...ys) * 1.1 || 1;
  const px = (x: number) => m.left + ((fx(x) - x0) / (x1 - x0 || 1)) * (width - m.left - m.right);
  const py = (y: number) => height - m.bottom - (y / y1) * (height - m.top - m.bottom);
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="${width / 2}" y="20" text-anchor="middle" font-size="14">${escapeXml(options.title)}</text>`,
    `<line x1="${m.left}" y1="${height - m.bottom}" x2="${width - m.right}" y2="${height - m.bottom}" stroke="#333"/>`,
    `<line x1="${m.left}" y1="${m.top}" x2="${m.left}" y2="${height - m.bottom}" stroke="#333"/>`,
    `<text x="${width / 2}" y="${height - 10}" text-anchor="middle">${escapeXml(options.xLabel)}</text>`,
    `<text x="15" y="${height / 2}" text-anchor="middle" transform="rotate(-90 15 ${height / 2})">${escapeXml(options.yLabel)}</text>`,
  ];
  for (let i = 0; i <= 4; i++) {
    const y = (y1 / 4) * i;
    out.push(`<line x1="${m.left - 4}" y1="${py(y)}" x2="${width - m.right}" y2="${py(y)}" stroke="#eee"/>`);
    out.push(`<text x="${m.left - 6}" y="${py(y) + 4}" text-anchor="end">${Math.round(y).toLocaleString("en")}</text>`);
  }
  for (const x of [...new Set(xs)].sort((a, b) => a - b)) {
    out.push(`<text x="${px(x)}" y="${height - m.bottom + 16}" text-anchor="middle">${x.toLocaleString("en")}</text>`);
  }
  options.series.forEach((s, i) => {
    const color = colors[i % colors.length];
    const path = s.points.map(([x, y], j) => `${j === 0 ? "M" : "L"}${px(x).toFixed(1)},${py(y).toFixed(1)}`).join(" ");
    out.push(`<path d="${path}" fill="none" stroke="${color}" stroke-width="2"/>`);
    for (const [x, y] of s.points) out.push(`<circle cx="${px(x)}" cy="${py(y)}" r="3" fill="${color}"/>`);
    out.push(`<text x="${width - m.right - 150}" y="${m.top + 14 * i}" fill="${color}">● ${escapeXml(s.name)}</text>`);
  });
  out.push("</svg>");
  return out.join("\n");
}

function escapeXml(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}
