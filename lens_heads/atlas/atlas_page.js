// The head atlas page (lens_heads/atlas/_atlas_page.py puts it in the page with the data).
const A = JSON.parse(document.getElementById("atlas-data").textContent);
const N = A.labels.length;
const INDEX = Object.fromEntries(A.labels.map((label, i) => [label, i]));
const FONT = {size: 10};
let current = A.measures[0];
let selected = null;
let sortBy = null, sortDown = true;

function fmt(v) {
  if (v === null || v === undefined) return "—";
  if (typeof v !== "number") return String(v);
  return Number.isInteger(v) ? String(v) : v.toPrecision(3);
}
function esc(s) {
  return String(s).replace(/[&<>"]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c]));
}
function grid(values) {
  const z = Array.from({length: A.n_layers}, () => Array(A.n_heads).fill(null));
  const text = Array.from({length: A.n_layers}, () => Array(A.n_heads).fill(""));
  for (let i = 0; i < N; i++) { z[A.layer[i]][A.head[i]] = values[i]; text[A.layer[i]][A.head[i]] = A.labels[i]; }
  return {z, text};
}

// -- the heat map ----------------------------------------------------------------------------
function drawMap() {
  const traces = [];
  if (current !== undefined) {
    const {z, text} = grid(A.values[current]);
    traces.push({z, text, type: "heatmap", colorscale: "Viridis",
                 hovertemplate: "%{text}: %{z:.3g}<extra></extra>"});
  }
  if (selected !== null) {
    traces.push({x: [A.head[selected]], y: [A.layer[selected]], type: "scatter", mode: "markers",
                 marker: {symbol: "square-open", size: 14, color: "red", line: {width: 2}},
                 hoverinfo: "skip", showlegend: false});
  }
  const layout = {
    title: {text: current === undefined ? A.model : `${current} (${A.model})`},
    width: Math.max(420, 160 + 34 * A.n_heads), height: Math.max(380, 110 + 18 * A.n_layers),
    margin: {t: 90, l: 60, r: 20, b: 50},
    xaxis: {title: {text: "head"}, dtick: 1, tickfont: FONT},
    yaxis: {title: {text: "layer"}, dtick: A.n_layers > 48 ? 2 : 1, tickfont: FONT},
  };
  Plotly.react("atlas-map", traces, layout);
  const note = (A.notes[current] || "") +
    (current in A.chance && A.chance[current] !== null ? ` Chance level: ${fmt(A.chance[current])}.` : "");
  document.getElementById("atlas-note").textContent = note;
}
function setMeasure(name) {
  current = name;
  document.getElementById("atlas-measure").value = name;
  drawMap();
}

// -- the card --------------------------------------------------------------------------------
function cardRow(name, i) {
  const chance = (name in A.chance && A.chance[name] !== null) ? fmt(A.chance[name]) : "";
  const rank = A.ranks[name][i];
  return `<tr><td>${esc(name)}</td><td class="value">${fmt(A.values[name][i])}</td>` +
         `<td>${rank === null ? "" : "rank " + rank + " of " + N}</td><td>${chance}</td></tr>`;
}
function showHead(i) {
  if (i === undefined || i === null) return;
  selected = i;
  const effects = A.measures.filter(m => /effect/.test(m));
  const others = A.measures.filter(m => !/effect/.test(m));
  const head = ["<tr><th>measure</th><th>value</th><th>rank</th><th>chance</th></tr>"];
  let html = `<h2 id="atlas-card-title">${esc(A.labels[i])}</h2><p>layer ${A.layer[i]}, ` +
             `head ${A.head[i]}, key-value group ${A.kv[i]}</p>`;
  if (effects.length) {
    html += `<h3>Exact single-head effects</h3><table id="atlas-card-effects">${head[0]}` +
            effects.map(m => cardRow(m, i)).join("") + "</table>";
  }
  html += `<h3>Other measures</h3><table id="atlas-card-measures">${head[0]}` +
          others.map(m => cardRow(m, i)).join("") + "</table>";
  for (const [name, values] of Object.entries(A.texts)) {
    html += `<p><b>${esc(name)}</b>: ${esc(values[i]) || "—"}</p>`;
  }
  document.getElementById("atlas-card").innerHTML = html;
  for (const row of document.querySelectorAll("#atlas-table tbody tr.head")) {
    row.classList.toggle("selected", Number(row.dataset.index) === i);
  }
  drawMap();
  drawPattern(i);
}
function attentionOf(i) {
  const n = A.attention.n, per = n * (n + 1) / 2;
  let k = i * per;
  const z = [];
  for (let q = 0; q < n; q++) {
    const row = [];
    for (let key = 0; key < n; key++) row.push(key <= q ? BYTES[k++] / 255 : null);
    z.push(row);
  }
  return z;
}
const BYTES = A.attention ? Uint8Array.from(atob(A.attention.bytes), c => c.charCodeAt(0)) : null;
function drawPattern(i) {
  if (!A.attention) return;
  const n = A.attention.n;
  const ticks = A.attention.tokens.map((t, j) => `${j} ${String(t).slice(0, 12)}`);
  const axis = {tickvals: ticks.map((_, j) => j), ticktext: ticks, tickfont: {size: 9}, automargin: true};
  const side = Math.max(360, 150 + 15 * n);
  Plotly.react("atlas-pattern", [{z: attentionOf(i), type: "heatmap", colorscale: "Blues", reversescale: true, zmin: 0, zmax: 1,
    hovertemplate: "query %{y}, key %{x}: %{z:.2f}<extra></extra>"}],
    {margin: {t: 80}, title: {text: `Attention of ${A.labels[i]} on the example sequence (rows: queries; steps of 1/255)`},
     width: side + 120, height: side, xaxis: axis, yaxis: {...axis, autorange: "reversed"}});
}

// -- the table -------------------------------------------------------------------------------
const COLUMNS = ["label", ...A.measures, ...Object.keys(A.texts)];
function cell(column, i) {
  if (column === "label") return esc(A.labels[i]);
  if (column in A.texts) return esc(A.texts[column][i]);
  const rank = A.ranks[column][i];
  return `${fmt(A.values[column][i])}${rank === null ? "" : ` <span class="rank">#${rank}</span>`}`;
}
function sortKey(column, i) {
  if (column === "label") return A.layer[i] * 10000 + A.head[i];
  if (column in A.texts) return A.texts[column][i];
  return A.values[column][i];
}
function drawTable() {
  const thead = document.querySelector("#atlas-table thead");
  const arrow = c => c === sortBy ? (sortDown ? " ▼" : " ▲") : "";
  thead.innerHTML = "<tr>" + COLUMNS.map(c => `<th data-column="${esc(c)}">${esc(c)}${arrow(c)}</th>`).join("") +
    "</tr><tr class=\"chance\">" + COLUMNS.map(c => `<td>${c === "label" ? "chance" :
      (c in A.chance && A.chance[c] !== null ? fmt(A.chance[c]) : "")}</td>`).join("") + "</tr>";
  const filter = document.getElementById("atlas-filter").value.trim().toLowerCase();
  let rows = [...Array(N).keys()].filter(i => !filter || A.labels[i].toLowerCase().includes(filter) ||
    Object.values(A.texts).some(values => values[i].toLowerCase().includes(filter)));
  if (sortBy !== null) {
    rows.sort((a, b) => {
      const x = sortKey(sortBy, a), y = sortKey(sortBy, b);
      if (x === null || x === undefined) return 1;  // missing values last, either way
      if (y === null || y === undefined) return -1;
      const order = x < y ? -1 : x > y ? 1 : 0;
      return sortDown ? -order : order;
    });
  }
  document.querySelector("#atlas-table tbody").innerHTML = rows.map(i =>
    `<tr class="head${i === selected ? " selected" : ""}" data-index="${i}">` +
    COLUMNS.map(c => `<td>${cell(c, i)}</td>`).join("") + "</tr>").join("");
  document.getElementById("atlas-count").textContent = `${rows.length} of ${N} heads`;
}
document.querySelector("#atlas-table thead").addEventListener("click", event => {
  const th = event.target.closest("th");
  if (!th) return;
  const column = th.dataset.column;
  sortDown = column === sortBy ? !sortDown : column !== "label";
  sortBy = column;
  if (A.measures.includes(column)) setMeasure(column);
  drawTable();
});
document.querySelector("#atlas-table tbody").addEventListener("click", event => {
  const row = event.target.closest("tr.head");
  if (row) showHead(Number(row.dataset.index));
});
document.getElementById("atlas-filter").addEventListener("input", drawTable);

// -- the agreement matrix and a pair's scatter -------------------------------------------------
const PAIR = {};
for (const p of A.pairs) { PAIR[`${p.first}\u0000${p.second}`] = p; PAIR[`${p.second}\u0000${p.first}`] = p; }
const AGREED = A.measures.filter(m => A.pairs.some(p => p.first === m || p.second === m));
function drawAgreement() {
  if (!AGREED.length) { document.getElementById("atlas-agreement").textContent = "No pair of measures was compared."; return; }
  const z = AGREED.map(a => AGREED.map(b => a === b ? 1 : (PAIR[`${a}\u0000${b}`] || {}).spearman ?? null));
  const text = AGREED.map(a => AGREED.map(b => {
    const p = PAIR[`${a}\u0000${b}`];
    return a === b ? a : p ? `${a} × ${b}: ${fmt(p.spearman)} [${fmt(p.low)}, ${fmt(p.high)}], Holm p ${fmt(p.p_holm)}` : "";
  }));
  const side = Math.max(420, 220 + 26 * AGREED.length);
  Plotly.newPlot("atlas-agreement", [{z, x: AGREED, y: AGREED, text, type: "heatmap", colorscale: "RdBu",
    zmin: -1, zmax: 1, hovertemplate: "%{text}<extra></extra>"}],
    {title: {text: "Spearman between measures"}, width: side + 80, height: side,
     margin: {l: 170, b: 170, t: 80}, xaxis: {tickfont: FONT, tickangle: 45}, yaxis: {tickfont: FONT, autorange: "reversed"}});
  document.getElementById("atlas-agreement").on("plotly_click", event => {
    const point = event.points[0];
    if (point.x !== point.y) showPair(point.y, point.x);
  });
}
function showPair(a, b) {
  const both = [...Array(N).keys()].filter(i => A.values[a][i] !== null && A.values[b][i] !== null);
  const p = PAIR[`${a}\u0000${b}`] || {};
  const title = `${a} against ${b}: Spearman ${fmt(p.spearman)} [${fmt(p.low)}, ${fmt(p.high)}]`;
  Plotly.react("atlas-pair", [{x: both.map(i => A.values[a][i]), y: both.map(i => A.values[b][i]),
    text: both.map(i => A.labels[i]), type: "scatter", mode: "markers", marker: {size: 6, opacity: 0.7},
    hovertemplate: "%{text}: %{x:.3g}, %{y:.3g}<extra></extra>"}],
    {title: {text: title}, width: 520, height: 440, xaxis: {title: {text: a}}, yaxis: {title: {text: b}}});
  document.getElementById("atlas-pair-stats").textContent =
    `${both.length} heads measured by both; Spearman ${fmt(p.spearman)}, 95% interval ` +
    `[${fmt(p.low)}, ${fmt(p.high)}], Holm-corrected permutation p ${fmt(p.p_holm)}; ` +
    `${fmt(p.overlap)} heads in both top sets against ${fmt(p.random)} expected at random.`;
  document.getElementById("atlas-pair").dataset.pair = `${a}|${b}`;
}

// -- start -----------------------------------------------------------------------------------
const menu = document.getElementById("atlas-measure");
menu.innerHTML = A.measures.map(m => `<option value="${esc(m)}">${esc(m)}</option>`).join("");
menu.addEventListener("change", () => setMeasure(menu.value));
Plotly.newPlot("atlas-map", [], {}).then(() => {
  drawMap();
  document.getElementById("atlas-map").on("plotly_click", event => {
    const point = event.points[0];
    showHead(INDEX[`L${point.y}H${point.x}`]);
  });
});
drawTable();
drawAgreement();
