// The drill-down: rows and record details rendered on demand from the inline JSON, so that a
// study of 10,000 records opens fast. Only the DOM API builds elements (textContent, never
// innerHTML), so a record's text can never become markup. No network access of any kind.
"use strict";
(function () {
  var PAGE = 50;
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var criteria = data.criteria;
  var records = data.records;
  var table = document.getElementById("records");
  var head = table.tHead.rows[0];
  var body = table.tBodies[0];
  var status = document.getElementById("records-status");
  var detail = document.getElementById("record-detail");
  var conditionSelect = document.getElementById("filter-condition");
  var criterionSelect = document.getElementById("filter-criterion");
  var invalidBox = document.getElementById("filter-invalid");
  var textInput = document.getElementById("filter-text");
  var previous = document.getElementById("page-previous");
  var next = document.getElementById("page-next");
  var pageLabel = document.getElementById("page-label");
  var state = { sort: null, descending: false, page: 0, rows: [], active: 0, selected: null };
  var haystacks = null;

  function el(tag, text, attributes) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (attributes) Object.keys(attributes).forEach(function (k) { node.setAttribute(k, attributes[k]); });
    return node;
  }
  function fixed(value, digits) {
    return value === null || value === undefined ? "" : Number(value).toFixed(digits);
  }
  function shownCriteria() {
    var only = criterionSelect.value;
    return criteria.map(function (c, i) { return i; }).filter(function (i) {
      return !only || criteria[i].name === only;
    });
  }
  function invalidOf(record, indices) {
    return indices.reduce(function (sum, i) { var k = record.k[i]; return sum + (k ? k[3] : 0); }, 0);
  }

  // Columns: key, label, value(record) for sorting, and whether the value is text.
  function columns() {
    var indices = shownCriteria();
    var out = [
      { key: "id", label: "record", text: true, value: function (r) { return r.id; } },
      { key: "group", label: data.groupLabel, text: true, value: function (r) { return r.g; } },
      { key: "condition", label: "condition", text: true, value: function (r) { return r.c; } }
    ];
    indices.forEach(function (i) {
      out.push({
        key: "score:" + criteria[i].name,
        label: criteria[i].name,
        title: criteria[i].display + " (" + criteria[i].lo + "-" + criteria[i].hi + ")",
        value: function (r) { return r.k[i] ? r.k[i][0] : null; }
      });
    });
    out.push({ key: "invalid", label: "invalid samples", value: function (r) { return invalidOf(r, indices); } });
    return out;
  }

  function searchText(index) {
    if (haystacks === null) {
      haystacks = records.map(function (r) {
        return [r.id, r.g, r.c, JSON.stringify(r.f)].join("\u0000").toLowerCase();
      });
    }
    return haystacks[index];
  }

  function compare(column) {
    return function (a, b) {
      var x = column.value(records[a]), y = column.value(records[b]);
      if (x === null || x === undefined) return y === null || y === undefined ? a - b : 1;
      if (y === null || y === undefined) return -1;
      var order = column.text ? String(x).localeCompare(String(y), undefined, { numeric: true }) : x - y;
      if (state.descending) order = -order;
      return order || a - b;
    };
  }

  function refresh(keepPage) {
    var cols = columns();
    var condition = conditionSelect.value;
    var needle = textInput.value.trim().toLowerCase();
    var indices = shownCriteria();
    var rows = [];
    for (var i = 0; i < records.length; i++) {
      var r = records[i];
      if (condition && r.c !== condition) continue;
      if (invalidBox.checked && invalidOf(r, indices) === 0) continue;
      if (needle && searchText(i).indexOf(needle) < 0) continue;
      rows.push(i);
    }
    var column = cols.filter(function (c) { return c.key === state.sort; })[0];
    if (column) rows.sort(compare(column));
    state.rows = rows;
    if (!keepPage) { state.page = 0; state.active = 0; }
    drawHead(cols);
    drawPage(cols);
  }

  function drawHead(cols) {
    head.replaceChildren();
    cols.forEach(function (column) {
      var th = el("th", null, { scope: "col" });
      if (column.key === state.sort) th.setAttribute("aria-sort", state.descending ? "descending" : "ascending");
      var button = el("button", column.label, { type: "button" });
      if (column.title) button.title = column.title;
      button.dataset.key = column.key;
      button.addEventListener("click", function () {
        state.descending = state.sort === column.key ? !state.descending : false;
        state.sort = column.key;
        refresh(false);
      });
      th.appendChild(button);
      head.appendChild(th);
    });
  }

  function drawPage(cols) {
    var pages = Math.max(1, Math.ceil(state.rows.length / PAGE));
    state.page = Math.min(state.page, pages - 1);
    var start = state.page * PAGE;
    var slice = state.rows.slice(start, start + PAGE);
    var fragment = document.createDocumentFragment();
    slice.forEach(function (index, position) {
      var r = records[index];
      var tr = el("tr", null, { tabindex: position === state.active ? "0" : "-1" });
      tr.dataset.index = index;
      if (index === state.selected) tr.setAttribute("aria-current", "true");
      cols.forEach(function (column, c) {
        var value = column.value(r);
        var cell = c === 0 ? el("th", value, { scope: "row" }) : el("td", column.text ? value : (column.key === "invalid" ? value : fixed(value, 2)));
        if (column.text) cell.className = "text";
        if (column.key === "invalid" && value > 0) cell.className = "bad";
        tr.appendChild(cell);
      });
      fragment.appendChild(tr);
    });
    body.replaceChildren(fragment);
    var filtered = state.rows.length === records.length ? "" : " (filtered from " + records.length + ")";
    status.textContent = state.rows.length
      ? "Records " + (start + 1) + "-" + (start + slice.length) + " of " + state.rows.length + filtered
      : "No record matches the filters" + filtered;
    pageLabel.textContent = "page " + (state.page + 1) + " of " + pages;
    previous.disabled = state.page === 0;
    next.disabled = state.page >= pages - 1;
  }

  function focusRow(position) {
    var rows = body.rows;
    if (!rows.length) return;
    position = Math.max(0, Math.min(rows.length - 1, position));
    for (var i = 0; i < rows.length; i++) rows[i].tabIndex = i === position ? 0 : -1;
    state.active = position;
    rows[position].focus();
  }

  function turnPage(step, position) {
    var pages = Math.ceil(state.rows.length / PAGE);
    var page = state.page + step;
    if (page < 0 || page >= pages) return false;
    state.page = page;
    state.active = 0;
    drawPage(columns());
    focusRow(position === "last" ? body.rows.length - 1 : 0);
    return true;
  }

  body.addEventListener("click", function (event) {
    var tr = event.target.closest("tr");
    if (tr) { focusRow(tr.sectionRowIndex); open(Number(tr.dataset.index)); }
  });
  body.addEventListener("keydown", function (event) {
    var tr = event.target.closest("tr");
    if (!tr) return;
    var at = tr.sectionRowIndex;
    var handled = true;
    switch (event.key) {
      case "ArrowDown": if (at === body.rows.length - 1) turnPage(1, "first"); else focusRow(at + 1); break;
      case "ArrowUp": if (at === 0) turnPage(-1, "last"); else focusRow(at - 1); break;
      case "Home": focusRow(0); break;
      case "End": focusRow(body.rows.length - 1); break;
      case "PageDown": turnPage(1, "first"); break;
      case "PageUp": turnPage(-1, "first"); break;
      case "Enter": case " ": open(Number(tr.dataset.index)); break;
      default: handled = false;
    }
    if (handled) event.preventDefault();
  });
  previous.addEventListener("click", function () { state.page -= 1; state.active = 0; drawPage(columns()); });
  next.addEventListener("click", function () { state.page += 1; state.active = 0; drawPage(columns()); });
  [conditionSelect, criterionSelect, invalidBox].forEach(function (control) {
    control.addEventListener("change", function () { refresh(false); });
  });
  textInput.addEventListener("input", function () { refresh(false); });
  document.querySelector("form.filters").addEventListener("submit", function (event) { event.preventDefault(); });

  // --- the record detail ----------------------------------------------------------------
  function fieldText(value) {
    return typeof value === "string" ? value : JSON.stringify(value, null, 2);
  }
  function renderPrompt(criterion, prompt, record) {
    var parts = prompt.parts, out = [];
    for (var i = 0; i < parts.length; i++) {
      if (i % 2 === 0) { out.push(parts[i]); continue; }
      var field = criterion.placeholders[parts[i]];
      var rendered = record.p && field in record.p ? record.p[field] : record.f[field];
      out.push(typeof rendered === "string" ? rendered : String(rendered));
    }
    return out.join("");
  }
  function answersTable(readings, caption) {
    var t = el("table", null, { "class": "answers" });
    t.appendChild(el("caption", caption));
    var headRow = el("tr");
    ["draw", "answer", "rating", "invalid because"].forEach(function (h) { headRow.appendChild(el("th", h, { scope: "col" })); });
    t.appendChild(el("thead")).appendChild(headRow);
    var tbody = t.appendChild(el("tbody"));
    readings.forEach(function (reading, draw) {
      var tr = tbody.appendChild(el("tr"));
      tr.appendChild(el("th", draw, { scope: "row" }));
      var cell = tr.appendChild(el("td", reading.length > 3 ? null : reading[0], { "class": "answer" }));
      if (reading.length > 3) {
        // A thinking judge: its reasoning, collapsed, above the answer the rating was read from.
        var thought = cell.appendChild(el("details", null, { "class": "reasoning" }));
        var told = "reasoning (" + reading[4].toLocaleString("en") + " characters" +
          (reading[5] ? ", cut off before it ended" : "") + ")";
        thought.appendChild(el("summary", told));
        thought.appendChild(el("div", reading[3], { "class": "thought" }));
        cell.appendChild(el("div", reading[0], { "class": "said" }));
      }
      tr.appendChild(el("td", reading[1] === null ? "invalid" : reading[1]));
      tr.appendChild(el("td", reading.length > 2 && reading[2] !== null ? reading[2] : ""));
      if (reading[1] === null) tr.className = "bad";
    });
    return t;
  }
  function distributionTable(distribution) {
    var t = el("table", null, { "class": "distribution" });
    t.appendChild(el("caption", "Rating distribution (first-token probabilities, renormalised)"));
    var headRow = el("tr");
    ["rating", "probability", ""].forEach(function (h) { headRow.appendChild(el("th", h, { scope: "col" })); });
    t.appendChild(el("thead")).appendChild(headRow);
    var tbody = t.appendChild(el("tbody"));
    distribution.forEach(function (pair) {
      var tr = tbody.appendChild(el("tr"));
      tr.appendChild(el("th", pair[0], { scope: "row" }));
      tr.appendChild(el("td", fixed(pair[1], 3)));
      var bar = el("span", null, { "class": "bar", "aria-hidden": "true" });
      bar.style.width = (pair[1] * 8).toFixed(2) + "rem";
      tr.appendChild(el("td")).appendChild(bar);
    });
    return t;
  }
  function open(index) {
    var record = records[index];
    state.selected = index;
    Array.prototype.forEach.call(body.rows, function (tr) {
      if (Number(tr.dataset.index) === index) tr.setAttribute("aria-current", "true");
      else tr.removeAttribute("aria-current");
    });
    detail.replaceChildren();
    detail.hidden = false;
    detail.dataset.record = record.id;
    detail.appendChild(el("h3", "Record " + record.id));
    var close = el("button", "Close", { type: "button" });
    close.addEventListener("click", function () { detail.hidden = true; state.selected = null; focusRow(state.active); });
    detail.appendChild(close);
    var cards = detail.appendChild(el("div", null, { "class": "criteria" }));
    criteria.forEach(function (criterion, i) {
      var entry = record.k[i];
      var section = cards.appendChild(el("section", null, { "class": "criterion", "data-criterion": criterion.name }));
      section.appendChild(el("h4", criterion.display + " (" + criterion.name + ")"));
      if (!entry) { section.appendChild(el("p", "not in the plan")); return; }
      var summary = "weighted score " + (entry[0] === null ? "none" : fixed(entry[0], 3)) +
        " (scale " + criterion.lo + "-" + criterion.hi + "); " + entry[1] + "; " +
        entry[2] + " valid, " + entry[3] + " invalid samples";
      // The SE: the spread of the valid ratings over sqrt(m), or (logprobs) the distribution's SD.
      if (entry[5] !== null) summary += "; " + (data.mode === "logprobs" ? "standard deviation of the distribution " : "standard error ") + fixed(entry[5], 3);
      section.appendChild(el("p", summary, { "class": "weighted" }));
      entry[4].forEach(function (part, p) {
        var prompt = criterion.prompts[p];
        if (part[0] !== null) {
          section.appendChild(el("h5", "rubric " + part[0] + ": " + (part[3] === null ? "no valid answer" : "holds with p = " + fixed(part[3], 3))));
        }
        var details = section.appendChild(el("details"));
        details.appendChild(el("summary", "Prompt sent (" + criterion.role + " message)"));
        details.appendChild(el("pre", renderPrompt(criterion, prompt, record), { "class": "prompt" }));
        if (part[1].length) section.appendChild(answersTable(part[1], "Answers" + (part[0] !== null ? " on rubric " + part[0] : "")));
        else section.appendChild(el("p", "no answer in the cache (" + entry[1] + ")"));
        if (data.mode === "logprobs" && part[2]) section.appendChild(distributionTable(part[2]));
      });
    });
    // The record's fields last: they can be long, and the answers are what a reader came for.
    detail.appendChild(el("h4", "Fields"));
    var dl = detail.appendChild(el("dl"));
    Object.keys(record.f).forEach(function (name) {
      dl.appendChild(el("dt", name));
      dl.appendChild(el("dd", fieldText(record.f[name])));
    });
    detail.focus();
  }
  detail.addEventListener("keydown", function (event) {
    if (event.key === "Escape") { detail.hidden = true; state.selected = null; focusRow(state.active); }
  });

  data.conditions.forEach(function (c) { conditionSelect.appendChild(el("option", c, { value: c })); });
  criteria.forEach(function (c) { criterionSelect.appendChild(el("option", c.display + " (" + c.name + ")", { value: c.name })); });
  refresh(false);
  // For bench/html_report.py: when the first page of records is on screen.
  if (window.performance && performance.mark) performance.mark("records-rendered");
})();
