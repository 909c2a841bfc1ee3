// Tables for people: columns padded to their widest cell, no colours, one line per row; and
// paragraphs wrapped for a terminal.

export function formatTable(header: string[], rows: (string | number)[][]): string {
  if (rows.length === 0) return "(none)";
  const cells = [header, ...rows.map((row) => row.map((cell) => oneLine(String(cell))))];
  const widths = header.map((_, i) => Math.max(...cells.map((row) => row[i]?.length ?? 0)));
  return cells
    .map((row) =>
      row
        .map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}

/** A cell is one line, and a long error message does not push the table off the screen. */
function oneLine(text: string): string {
  const flat = text.replace(/\s+/g, " ");
  return flat.length > 80 ? `${flat.slice(0, 79)}…` : flat;
}

/** ISO time as the machine's local time with its offset; "" for none. */
export function formatTime(iso: string | null | undefined): string {
  if (!iso) return "";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  const offset = -date.getTimezoneOffset();
  const local = new Date(date.getTime() + offset * 60_000).toISOString().slice(0, 19).replace("T", " ");
  const sign = offset >= 0 ? "+" : "-";
  const hh = String(Math.floor(Math.abs(offset) / 60)).padStart(2, "0");
  const mm = String(Math.abs(offset) % 60).padStart(2, "0");
  return `${local}${sign}${hh}:${mm}`;
}

/** `text` in lines of at most `width` characters (a longer word stands alone), each after `indent`. */
export function wrap(text: string, { width = 100, indent = "" }: { width?: number; indent?: string } = {}): string {
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (line && indent.length + line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) lines.push(line);
  return lines.map((l) => `${indent}${l}`).join("\n");
}
