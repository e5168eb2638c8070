// bertkit inspect: the attention page. Vanilla JS, no dependencies: reads the JSON in
// #inspect-data (bertkit.pages.inspect) and draws the head view (SVG), the layers x heads
// overview (canvas thumbnails), the tokens, the fill-mask candidates and the prediction.
(function () {
  "use strict";
  var SVG_NS = "http://www.w3.org/2000/svg";
  var data = JSON.parse(document.getElementById("inspect-data").textContent);
  var T = data.tokens.length, L = data.layers, H = data.heads;
  var weights = (function () { // (L, H, T, T) probabilities quantized to bytes (x / 255)
    var raw = atob(data.attention), bytes = new Uint8Array(raw.length);
    for (var i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
    return bytes;
  })();
  var state = { layer: 0, heads: allHeads(), token: null };
  var ROW = 20, COL = 150, GAP = 140, TOP = 10;

  function allHeads() { var s = []; for (var h = 0; h < H; h++) s.push(h); return s; }
  function weight(l, h, i, j) { return weights[((l * H + h) * T + i) * T + j] / 255; }
  function headColor(h) { return "hsl(" + Math.round(h * 360 / H) + ",70%,42%)"; }
  function el(tag, attrs, text) {
    var node = tag === "svg" || tag === "line" || tag === "text" || tag === "rect" || tag === "g"
      ? document.createElementNS(SVG_NS, tag) : document.createElement(tag);
    for (var k in attrs) node.setAttribute(k, attrs[k]);
    if (text !== undefined) node.textContent = text;
    return node;
  }
  function byId(id) { return document.getElementById(id); }

  function selectToken(i) {
    state.token = state.token === i ? null : i;
    render();
  }

  // ---------------------------------------------------------------- tokens strip
  function drawTokens() {
    var box = byId("tokens");
    box.textContent = "";
    data.tokens.forEach(function (token, i) {
      var b = el("button", { "class": "token" + (data.token_type_ids[i] ? " segment-b" : "")
        + (state.token === i ? " selected" : ""), "data-index": i, type: "button", title: "position " + i }, token);
      b.addEventListener("click", function () { selectToken(i); });
      box.appendChild(b);
    });
  }

  // ---------------------------------------------------------------- controls
  function drawControls() {
    var select = byId("layer");
    if (!select.options.length) {
      for (var l = 0; l < L; l++) select.appendChild(el("option", { value: l }, "layer " + l));
      select.addEventListener("change", function () { state.layer = +select.value; render(); });
    }
    select.value = state.layer;
    var box = byId("heads");
    box.textContent = "";
    for (var h = 0; h < H; h++) {
      (function (h) {
        var on = state.heads.indexOf(h) >= 0;
        var b = el("button", { "class": "head-toggle" + (on ? " on" : ""), "data-head": h, type: "button",
          "aria-pressed": on, style: "--head:" + headColor(h) }, String(h));
        b.addEventListener("click", function () {
          state.heads = on ? state.heads.filter(function (x) { return x !== h; }) : state.heads.concat([h]).sort(function (a, b) { return a - b; });
          render();
        });
        box.appendChild(b);
      })(h);
    }
  }

  // ---------------------------------------------------------------- head view (SVG)
  function drawHeadView() {
    var svg = byId("headview");
    svg.textContent = "";
    var width = 2 * COL + GAP, height = TOP * 2 + T * ROW;
    svg.setAttribute("width", width);
    svg.setAttribute("height", height);
    svg.setAttribute("viewBox", "0 0 " + width + " " + height);
    svg.appendChild(el("rect", { x: 0, y: 0, width: width, height: height, fill: "#ffffff" }));
    var lines = el("g", { "class": "lines" });
    svg.appendChild(lines);
    var rows = state.token === null ? null : [state.token];
    state.heads.forEach(function (h) {
      for (var i = 0; i < T; i++) {
        if (rows && rows.indexOf(i) < 0) continue;
        for (var j = 0; j < T; j++) {
          var w = weight(state.layer, h, i, j);
          if (w < data.min_weight) continue;
          lines.appendChild(el("line", { "class": "attn", x1: COL, y1: TOP + (i + 0.5) * ROW, x2: COL + GAP,
            y2: TOP + (j + 0.5) * ROW, stroke: headColor(h), "stroke-opacity": Math.min(1, Math.sqrt(w)).toFixed(3), // sqrt: as the thumbnails
            "stroke-width": (1 + 2 * w).toFixed(2), "data-head": h, "data-from": i, "data-to": j }));
        }
      }
    });
    data.tokens.forEach(function (token, i) {
      [["left", COL - 6, "end"], ["right", COL + GAP + 6, "start"]].forEach(function (side) {
        var t = el("text", { "class": "side-token " + side[0], x: side[1], y: TOP + (i + 0.5) * ROW + 4,
          "text-anchor": side[2], "font-family": "sans-serif", "font-size": 12, "data-index": i,
          fill: state.token === i ? "#b00020" : "#222222", "font-weight": state.token === i ? "bold" : "normal" },
          token);
        t.addEventListener("click", function () { selectToken(i); });
        svg.appendChild(t);
      });
    });
  }

  // ---------------------------------------------------------------- overview (layers x heads)
  function drawOverview() {
    var grid = byId("overview");
    if (!grid.childNodes.length) {
      grid.style.gridTemplateColumns = "auto repeat(" + H + ", auto)";
      grid.appendChild(el("span", { "class": "axis" }, ""));
      for (var h = 0; h < H; h++) grid.appendChild(el("span", { "class": "axis" }, "h" + h));
      for (var l = 0; l < L; l++) {
        grid.appendChild(el("span", { "class": "axis" }, "L" + l));
        for (h = 0; h < H; h++) grid.appendChild(thumbnail(l, h));
      }
    }
    var thumbs = grid.querySelectorAll("canvas.thumb");
    for (var k = 0; k < thumbs.length; k++) {
      var c = thumbs[k], on = +c.dataset.layer === state.layer && state.heads.indexOf(+c.dataset.head) >= 0;
      c.classList.toggle("selected", on);
    }
  }
  function thumbnail(l, h) {
    var c = el("canvas", { "class": "thumb", width: T, height: T, "data-layer": l, "data-head": h,
      title: "layer " + l + ", head " + h });
    var ctx = c.getContext("2d"), img = ctx.createImageData(T, T);
    for (var i = 0; i < T; i++) {
      for (var j = 0; j < T; j++) {
        var w = Math.sqrt(weight(l, h, i, j)), p = 4 * (i * T + j); // sqrt: faint weights stay visible
        img.data[p] = 255 - 222 * w; img.data[p + 1] = 255 - 160 * w; img.data[p + 2] = 255 - 60 * w;
        img.data[p + 3] = 255;
      }
    }
    ctx.putImageData(img, 0, 0);
    c.addEventListener("click", function () { state.layer = l; state.heads = [h]; render(); });
    return c;
  }

  // ---------------------------------------------------------------- side panels
  function drawFillMask() {
    var box = byId("fill-mask");
    box.textContent = "";
    if (!data.fill_mask) { box.appendChild(el("p", { "class": "note" }, data.fill_mask_note)); return; }
    if (state.token === null) { box.appendChild(el("p", { "class": "note" }, "Click a token to see what the masked-LM head puts there.")); return; }
    var candidates = data.fill_mask[state.token];
    if (!candidates) { box.appendChild(el("p", { "class": "note" }, "No candidates at a special token.")); return; }
    box.appendChild(el("p", {}, "Position " + state.token + " (" + data.tokens[state.token] + ") masked:"));
    var list = el("ol", { "class": "candidates" });
    candidates.forEach(function (c) {
      var item = el("li", {});
      item.appendChild(el("span", { "class": "cand-token" }, c.token_str || c.token));
      item.appendChild(el("span", { "class": "bar", style: "width:" + Math.round(c.score * 120) + "px" }));
      item.appendChild(el("span", { "class": "score" }, (100 * c.score).toFixed(1) + "%"));
      list.appendChild(item);
    });
    box.appendChild(list);
  }
  function drawPrediction() {
    var box = byId("prediction");
    if (box.childNodes.length) return;
    if (!data.prediction) { box.appendChild(el("p", { "class": "note" }, data.prediction_note)); return; }
    var p = data.prediction;
    if (p.label !== undefined) box.appendChild(el("p", { "class": "headline" }, "label: " + p.label
      + (p.score !== undefined ? "  (" + (100 * p.score).toFixed(1) + "%)" : "")));
    box.appendChild(el("pre", {}, JSON.stringify(p, null, 1)));
  }

  // ---------------------------------------------------------------- export
  function svgText() {
    var svg = byId("headview").cloneNode(true);
    svg.setAttribute("xmlns", SVG_NS);
    return new XMLSerializer().serializeToString(svg);
  }
  function download(name, url) {
    var a = el("a", { href: url, download: name });
    document.body.appendChild(a); a.click(); a.remove();
  }
  function exportSvg() {
    var url = URL.createObjectURL(new Blob([svgText()], { type: "image/svg+xml" }));
    download("attention-layer" + state.layer + ".svg", url);
    setTimeout(function () { URL.revokeObjectURL(url); }, 1000);
  }
  function exportPng() {
    var svg = byId("headview"), image = new Image(), scale = 2;
    image.onload = function () {
      var c = el("canvas", { width: svg.width.baseVal.value * scale, height: svg.height.baseVal.value * scale });
      var ctx = c.getContext("2d");
      ctx.scale(scale, scale);
      ctx.drawImage(image, 0, 0);
      download("attention-layer" + state.layer + ".png", c.toDataURL("image/png"));
    };
    image.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(svgText());
  }

  function render() {
    drawTokens(); drawControls(); drawHeadView(); drawOverview(); drawFillMask(); drawPrediction();
    document.body.dataset.layer = state.layer;
    document.body.dataset.token = state.token === null ? "" : state.token;
  }

  byId("export-svg").addEventListener("click", exportSvg);
  byId("export-png").addEventListener("click", exportPng);
  byId("all-heads").addEventListener("click", function () { state.heads = allHeads(); render(); });
  render();
  document.body.dataset.ready = "true";
})();
