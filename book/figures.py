"""Drawing helpers for the book's figures (matplotlib only, run when the book builds).

Each function draws from live objects: a tensor's (storage, shape, strides,
offset), a traced graph's nodes, the autograd tape. Nothing here is a picture
of a made-up example.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import FancyArrowPatch, Rectangle

PALETTE = plt.get_cmap("tab20")


# --------------------------------------------------------------- chapter 1: layouts
def _positions(shape, strides, offset):
    """Storage position of every element of a view, as an array of ``shape``."""
    pos = np.full(shape, offset, dtype=int)
    for d, (n, s) in enumerate(zip(shape, strides)):
        idx = np.arange(n).reshape([-1 if k == d else 1 for k in range(len(shape))])
        pos = pos + idx * s
    return pos


def draw_view(ax, tensor, title):
    """Storage strip on top, the view's 2-D grid below; each cell shows its storage slot.

    A cell's colour is its storage slot's colour, so stride 0 (expand) shows as a
    repeated colour and a negative stride as colours running backwards.
    """
    data = tensor._data
    storage = np.asarray(data.storage).ravel()
    shape = tuple(tensor.shape) if len(tensor.shape) == 2 else (1, *tensor.shape)
    strides = tuple(data.strides) if len(tensor.shape) == 2 else (0, *data.strides)
    pos = _positions(shape, strides, data.offset)
    used = set(pos.ravel().tolist())
    n = len(storage)
    for k in range(n):
        face = PALETTE(k % 20) if k in used else "white"
        ax.add_patch(Rectangle((k, 0), 1, 1, facecolor=face, edgecolor="black", lw=0.8))
        ax.text(k + 0.5, 0.5, f"{storage[k]:g}", ha="center", va="center", fontsize=8)
        ax.text(k + 0.5, 1.15, str(k), ha="center", va="bottom", fontsize=6, color="gray")
    ax.text(-0.3, 0.5, "storage", ha="right", va="center", fontsize=8)
    rows, cols = shape
    top = -1.2
    for i in range(rows):
        for j in range(cols):
            p = pos[i, j]
            ax.add_patch(
                Rectangle(
                    (j, top - i - 1),
                    1,
                    1,
                    facecolor=PALETTE(p % 20),
                    edgecolor="black",
                    lw=0.8,
                )
            )
            ax.text(j + 0.5, top - i - 0.5, f"{storage[p]:g}", ha="center", va="center", fontsize=8)
    ax.text(-0.3, top - rows / 2, "view", ha="right", va="center", fontsize=8)
    ax.set_title(
        f"{title}\nshape={tuple(tensor.shape)} strides={tuple(data.strides)} offset={data.offset}",
        fontsize=9,
    )
    ax.set_xlim(-2.2, max(n, cols) + 0.2)
    ax.set_ylim(top - rows - 0.2, 1.6)
    ax.set_aspect("equal")
    ax.axis("off")


# --------------------------------------------------------------- graphs (chapters 2 and 5)
def _layers(items):
    """Depth of each item: 0 for sources, else one more than its deepest input."""
    depth = {}
    for key, _, _, inputs in items:
        depth[key] = 1 + max((depth[i] for i in inputs if i in depth), default=-1)
    return depth


def draw_dag(ax, items, title="", outputs=(), colours=None, edges=None, curve_skips=False):
    """Draw a DAG given in topological order as ``(key, label, kind, input_keys)``.

    ``kind`` is ``"input"``, ``"const"`` or ``"op"`` and picks the box colour;
    ``colours`` (key -> colour) overrides it per node. ``edges`` maps
    ``(input_key, key)`` to arrow options (``color``, ``ls``, ``lw``, ``label``);
    ``curve_skips`` bends an edge that skips a layer, so it does not run through
    the nodes between its ends.
    Layers run top to bottom; nodes of one layer are spread left to right.
    """
    depth = _layers(items)
    by_layer: dict[int, list] = {}
    for key, *_ in items:
        by_layer.setdefault(depth[key], []).append(key)
    xy = {}
    width = max(len(v) for v in by_layer.values())
    for d, keys in by_layer.items():
        for k, key in enumerate(keys):
            xy[key] = ((k + 0.5) * width / len(keys), -d)
    palette = {"input": "#cfe8ff", "const": "#eeeeee", "op": "#ffe4b5", "grad": "#d8f5d0"}
    edges = edges or {}
    labels = []  # placed once the axes' scale is known (a bent arrow's middle depends on it)
    for key, _label, _kind, inputs in items:
        for i in inputs:
            if i in xy:
                style = edges.get((i, key), {})
                (x0, y0), (x1, y1) = xy[i], xy[key]
                rad = -0.8 if curve_skips and y0 - y1 > 1 and abs(x0 - x1) < 1e-9 else 0.0
                ax.add_patch(
                    FancyArrowPatch(
                        xy[i],
                        xy[key],
                        arrowstyle="-|>",
                        mutation_scale=10,
                        shrinkA=11,
                        shrinkB=11,
                        color=style.get("color", "gray"),
                        linestyle=style.get("ls", "-"),
                        linewidth=style.get("lw", 1.0),
                        connectionstyle=f"arc3,rad={rad}",
                    )
                )
                if style.get("label"):
                    labels.append((x0, y0, x1, y1, rad, style))
    for key, label, kind, _ in items:
        x, y = xy[key]
        kind = (colours or {}).get(key, kind)
        ax.text(
            x,
            y,
            label,
            ha="center",
            va="center",
            fontsize=7,
            family="monospace",
            bbox={"boxstyle": "round,pad=0.3", "fc": palette.get(kind, kind), "ec": "black"},
        )
    for k, o in enumerate(outputs):
        x, y = xy[o]
        ax.annotate(
            f"output {k}",
            (x, y - 0.18),
            (x, y - 0.7),
            ha="center",
            fontsize=7,
            arrowprops={"arrowstyle": "<|-", "color": "gray"},
        )
    ax.set_xlim(-0.2, width + 0.2)
    ax.set_ylim(-max(by_layer) - (1.0 if outputs else 0.5), 0.5)
    box = ax.get_window_extent()
    x_per_y = (box.height / (max(by_layer) + 1.5)) / (box.width / (width + 0.4))
    for x0, y0, x1, y1, rad, style in labels:
        # arc3 bends by rad * (dy, -dx) in display space; the curve's middle is half that
        ax.text(
            (x0 + x1) / 2 + rad / 2 * (y1 - y0) * x_per_y,
            (y0 + y1) / 2 - rad / 2 * (x1 - x0) / x_per_y,
            style["label"],
            ha="left" if rad else "center",
            va="center",
            fontsize=6,
            color=style.get("color", "gray"),
            bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none"},
        )
    ax.set_title(title, fontsize=9)
    ax.axis("off")


def graph_items(graph):
    """A traced minitorch graph as ``draw_dag`` items (cond branches shown as one node)."""
    items = []
    for n in graph.nodes:
        if n.op == "input":
            items.append((n, f"%{n.name} input\n{n.spec}", "input", []))
        elif n.op == "const":
            items.append((n, f"const\n{n.spec}", "const", []))
        else:
            items.append((n, f"%{n.name} {n.op}\n{n.spec}", "op", list(n.inputs)))
    return items


def draw_graph(graph, title="", figsize=None):
    items = graph_items(graph)
    depth = max(_layers(items).values()) + 1
    fig, ax = plt.subplots(figsize=figsize or (7, 0.75 * depth + 0.8))
    draw_dag(ax, items, title or graph.name, outputs=graph.outputs)
    fig.tight_layout()
    return fig


def tape_items(root):
    """The autograd tape behind ``root`` as ``draw_dag`` items, leaves first."""
    order, seen, stack = [], set(), [(root, False)]
    while stack:
        t, done = stack.pop()
        if done:
            order.append(t)
            continue
        if id(t) in seen:
            continue
        seen.add(id(t))
        stack.append((t, True))
        if t._node is not None:
            for i in reversed(t._node.inputs):
                stack.append((i, False))
    items = []
    for t in order:
        key = id(t)
        if t._node is None:
            kind = "input" if t.requires_grad else "const"
            label = f"leaf {tuple(t.shape)}" + ("\nrequires_grad" if t.requires_grad else "")
            items.append((key, label, kind, []))
        else:
            label = f"{t._node.op.name}\n{tuple(t.shape)}"
            items.append((key, label, "op", [id(i) for i in t._node.inputs]))
    return items


# --------------------------------------------------------------- chapter 4: GPU pictures
def draw_tiling(ax, n=8, tile=4, block=(1, 0)):
    """C = A @ B with square tiles: the output tile of one block and the tiles it loads."""
    bi, bj = block
    steps = n // tile
    panels = {"A": (0, 0), "B": (n + 2, 0), "C = A @ B": (2 * n + 4, 0)}
    for name, (x0, _) in panels.items():
        for k in range(steps + 1):
            ax.plot([x0 + k * tile, x0 + k * tile], [0, -n], color="black", lw=1)
            ax.plot([x0, x0 + n], [-k * tile, -k * tile], color="black", lw=1)
        ax.text(x0 + n / 2, 0.6, name, ha="center", fontsize=9)
    colours = plt.get_cmap("viridis")(np.linspace(0.2, 0.9, steps))
    for s in range(steps):
        ax.add_patch(Rectangle((s * tile, -(bi + 1) * tile), tile, tile, fc=colours[s], alpha=0.8))
        ax.add_patch(
            Rectangle((n + 2 + bj * tile, -(s + 1) * tile), tile, tile, fc=colours[s], alpha=0.8)
        )
        ax.text(s * tile + tile / 2, -(bi + 0.5) * tile, f"step {s}", ha="center", fontsize=7)
        ax.text(
            n + 2 + bj * tile + tile / 2,
            -(s + 0.5) * tile,
            f"step {s}",
            ha="center",
            fontsize=7,
        )
    ax.add_patch(
        Rectangle((2 * n + 4 + bj * tile, -(bi + 1) * tile), tile, tile, fc="tab:red", alpha=0.7)
    )
    ax.text(
        2 * n + 4 + bj * tile + tile / 2,
        -(bi + 0.5) * tile,
        f"block\n({bi},{bj})",
        ha="center",
        va="center",
        fontsize=7,
        color="white",
    )
    ax.set_xlim(-0.5, 3 * n + 4.5)
    ax.set_ylim(-n - 0.5, 1.4)
    ax.set_aspect("equal")
    ax.axis("off")


def draw_coalescing(ax, threads=8, row_len=8):
    """Which addresses one warp's threads touch: walking along a row vs down a column."""
    for r, (label, addr) in enumerate(
        [
            ("thread t reads a[0, t]  (stride 1: coalesced)", lambda t: t),
            ("thread t reads a[t, 0]  (stride row_len: scattered)", lambda t: t * row_len),
        ]
    ):
        y = -r * 3
        n = threads * row_len if r else threads * 2
        n = min(n, 64)
        for k in range(n):
            ax.add_patch(Rectangle((k * 0.25, y), 0.25, 0.6, fc="white", ec="lightgray", lw=0.5))
        for seg in range(0, n, 8):
            ax.add_patch(Rectangle((seg * 0.25, y), 2.0, 0.6, fill=False, ec="black", lw=1))
        for t in range(threads):
            a = addr(t)
            if a < n:
                ax.add_patch(Rectangle((a * 0.25, y), 0.25, 0.6, fc="tab:orange"))
                ax.annotate(
                    "",
                    (a * 0.25 + 0.125, y + 0.6),
                    (t * 0.6 + 0.3, y + 1.6),
                    arrowprops={"arrowstyle": "-|>", "color": "gray", "lw": 0.7},
                )
                ax.text(t * 0.6 + 0.3, y + 1.7, f"t{t}", ha="center", fontsize=6)
        touched = len({addr(t) // 8 for t in range(threads)})
        ax.text(0, y - 0.5, f"{label}: {touched} memory segment(s) of 8 elements", fontsize=8)
    ax.set_xlim(-0.3, 16.3)
    ax.set_ylim(-4.2, 2.2)
    ax.axis("off")


# --------------------------------------------------------------- chapter 6: passes
def draw_before_after(before, after, titles=("traced", "after the passes"), height=None):
    """Two graphs side by side, on one vertical scale (so a shorter graph looks shorter)."""
    items = [graph_items(g) for g in (before, after)]
    depth = max(max(_layers(i).values()) + 1 for i in items)
    fig, axes = plt.subplots(1, 2, figsize=(11, height or 0.7 * depth + 1.0))
    for ax, g, it, title in zip(axes, (before, after), items, titles):
        draw_dag(ax, it, f"{title}: {len(g.ops)} ops", outputs=g.outputs)
        ax.set_ylim(-depth - 0.5, 0.5)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------- chapter 7: fusion
def draw_fusion(graph, title=""):
    """The unfused graph with each fused group in its own colour and every refused
    producer -> consumer edge drawn red, dashed and labelled with the fuser's reason.

    Groups are found by the fuser itself (``find_groups`` on a copy), so the picture
    is the decision the compiler makes, not a drawing of it.
    """
    from matplotlib.patches import Patch

    from minitorch.fusion.group import find_groups, is_compute
    from minitorch.passes import clone_graph

    g = clone_graph(graph)
    groups, refusals, _ = find_groups(g)
    groups = [gr for gr in groups if sum(1 for m in gr.members if is_compute(m)) >= 2]
    cmap = plt.get_cmap("Set2")
    colours, edges, handles = {}, {}, []
    for k, gr in enumerate(groups):
        c = cmap(k % 8)
        kind = "epilogue" if gr.anchor else "reduce" if gr.reduce else "elementwise"
        handles.append(Patch(fc=c, ec="black", label=f"fused_{k} [{kind}]"))
        for m in gr.members:
            colours[m] = c
            for i in m.inputs:
                if i in gr.members:
                    edges[(i, m)] = {"color": "black", "lw": 2.0}
    for r in refusals:
        if r.consumer is not None:
            edges[(r.producer, r.consumer)] = {"color": "tab:red", "ls": "--", "label": r.reason}
    items = graph_items(g)
    depth = max(_layers(items).values()) + 1
    fig, ax = plt.subplots(figsize=(9, 1.0 * depth + 1.0))
    draw_dag(
        ax,
        items,
        title or g.name,
        outputs=g.outputs,
        colours=colours,
        edges=edges,
        curve_skips=True,
    )
    handles.append(Patch(fc="#ffe4b5", ec="black", label="runs alone"))
    handles.append(plt.Line2D([], [], color="tab:red", ls="--", label="refused merge (reason)"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------- chapter 9: training
PHASE_COLOURS = {"forward": "#cfe8ff", "backward": "#ffd8b1", "update": "#d8f5d0"}


def step_phases(graph, phases):
    """Each op node of a traced step -> "forward" / "backward" / "update", in graph order.

    ``phases`` is the compiled entry's op count per phase (the tracer records the
    phases in that order).
    """
    out, k = {}, 0
    bounds = [("forward", phases["forward"]), ("backward", phases["backward"])]
    for n in graph.ops:
        left = k
        phase = "update"
        for name, count in bounds:
            if left < count:
                phase = name
                break
            left -= count
        out[n] = phase
        k += 1
    return out


def draw_step_graph(graph, phases, title=""):
    """A traced training step in program order, one lane per phase.

    Each op is a box in its phase's lane at its position in the program; an arc
    joins a forward value to every backward op that reads it: the saved
    activations, whose boxes get a thick outline. The span of the arcs is how long
    each saved value must stay alive.
    """
    from matplotlib.patches import Patch

    phase = step_phases(graph, phases)
    lanes = {"forward": 2, "backward": 1, "update": 0}
    order = {n: k for k, n in enumerate(graph.ops)}
    saved = {
        i
        for n in graph.ops
        if phase[n] == "backward"
        for i in n.inputs
        if i in phase and phase[i] == "forward"
    }
    fig, ax = plt.subplots(figsize=(max(10, 0.2 * len(order)), 4.2))
    for n in graph.ops:
        if phase[n] != "backward":
            continue
        for i in n.inputs:
            if i in saved:
                x0, x1 = order[i], order[n]
                ax.annotate(
                    "",
                    (x1, lanes["backward"] + 0.25),
                    (x0, lanes["forward"] - 0.25),
                    arrowprops={
                        "arrowstyle": "-|>",
                        "color": "tab:purple",
                        "lw": 0.8,
                        "alpha": 0.6,
                        "connectionstyle": "arc3,rad=-0.15",
                    },
                )
    for n in graph.ops:
        x, y = order[n], lanes[phase[n]]
        ax.text(
            x,
            y,
            n.op,
            rotation=90,
            ha="center",
            va="center",
            fontsize=7,
            family="monospace",
            bbox={
                "boxstyle": "round,pad=0.2",
                "fc": PHASE_COLOURS[phase[n]],
                "ec": "tab:purple" if n in saved else "black",
                "lw": 2.0 if n in saved else 0.5,
            },
        )
    ax.set_yticks(list(lanes.values()), list(lanes))
    ax.set_xlim(-1, len(order))
    ax.set_ylim(-0.7, 2.7)
    ax.set_xlabel("position in the step's program (op number)")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    handles = [Patch(fc=c, ec="black", label=p) for p, c in PHASE_COLOURS.items()]
    handles.append(
        Patch(fc="white", ec="tab:purple", lw=2, label=f"saved for backward ({len(saved)})")
    )
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    ax.set_title(title or f"{graph.name}: {len(order)} ops", fontsize=9)
    fig.tight_layout()
    return fig


def draw_gantt(ax, records, title=""):
    """A schedule as a Gantt chart: ``records`` are ``(lane, start_s, end_s, label)``."""
    lanes = sorted({r[0] for r in records}, key=str)
    t0 = min(r[1] for r in records)
    span = max(r[2] for r in records) - t0
    cmap = plt.get_cmap("tab10")
    for k, (lane, start, end, label) in enumerate(records):
        row = lanes.index(lane)
        ax.broken_barh(
            [((start - t0) * 1e3, (end - start) * 1e3)],
            (row - 0.35, 0.7),
            facecolor=cmap(k % 10),
            edgecolor="black",
            lw=0.5,
        )
        if end - start < span / 14:  # too narrow to hold its label
            continue
        ax.text(
            (start + end) / 2 * 1e3 - t0 * 1e3,
            row,
            label,
            ha="center",
            va="center",
            fontsize=7,
            clip_on=True,
        )
    ax.set_yticks(range(len(lanes)), [str(x) for x in lanes])
    ax.invert_yaxis()
    ax.set_xlabel("ms since the call started")
    ax.set_title(title, fontsize=9)


# --------------------------------------------------------------- tables
def html_table(header, rows, caption=""):
    """A table as HTML (an ``IPython.display.HTML``): wide tables wrap in the page
    instead of running off its right edge as printed text does."""
    from html import escape

    from IPython.display import HTML

    def cell(v):
        return escape(f"{v:,.3g}" if isinstance(v, float) else str(v))

    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in r) + "</tr>" for r in rows)
    cap = f"<caption>{escape(caption)}</caption>" if caption else ""
    return HTML(f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def measure(fn, repeat: int = 7, warmup: int = 1, min_time: float = 0.005) -> float:
    """Median seconds per call of ``fn`` after ``warmup`` calls; each sample loops ``fn``
    until it has run ``min_time`` so tiny functions are timed over many calls."""
    import gc
    import time

    for _ in range(warmup):
        fn()
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t = time.perf_counter() - t0
        if t >= min_time or n >= 1 << 20:
            break
        n *= 2
    samples = [t / n]
    gc_was = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeat - 1):
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            samples.append((time.perf_counter() - t0) / n)
    finally:
        if gc_was:
            gc.enable()
    return float(np.median(samples))


def say(*parts, sep: str = " ", width: int = 100) -> None:
    """``print``, with each line wrapped at ``width`` (the page's column) under a 2-space indent:
    an error message or a long list stays readable instead of running off the page."""
    import textwrap

    for line in sep.join(str(p) for p in parts).splitlines() or [""]:
        indent = line[: len(line) - len(line.lstrip())] + "  "
        print(textwrap.fill(line, width, subsequent_indent=indent, break_on_hyphens=False) or line)


def draw_training(runs: dict, lrs=None, smooth: int = 20, figsize=(9, 2.8)):
    """Training-loss curves ``{label: losses}`` (raw, faint; and a running mean of ``smooth``
    steps), with the learning rate of each step beside them when ``lrs`` is given."""
    fig, axes = plt.subplots(1, 2 if lrs is not None else 1, figsize=figsize, squeeze=False)
    ax = axes[0][0]
    for label, losses in runs.items():
        (line,) = ax.plot(losses, alpha=0.25)
        k = min(smooth, len(losses))
        mean = np.convolve(losses, np.ones(k) / k, mode="valid")
        ax.plot(np.arange(k - 1, len(losses)), mean, color=line.get_color(), label=label)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    ax.legend()
    if lrs is not None:
        axes[0][1].plot(lrs)
        axes[0][1].set_xlabel("step")
        axes[0][1].set_ylabel("learning rate")
    fig.tight_layout()
    return fig
