#!/usr/bin/env python3
"""scripts/plot_compare.py's label placement: on a crowded roofline no two labels overlap, none
covers the legend or a marker, and points of one series at the same spot get one joined label.

Usage: plot_labels_test.py SOURCE_DIR (prints "ok"; exits 1 naming the first fault)."""
import sys

sys.path.insert(0, sys.argv[1] + "/scripts")
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import plot_compare  # noqa: E402


def box(b):
    return (b.x0, b.y0, b.x1, b.y1)


def overlaps(a, b):
    return min(a[2], b[2]) - max(a[0], b[0]) > 0.01 and min(a[3], b[3]) - max(a[1], b[1]) > 0.01


def main():
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.set_xscale("log")
    ax.set_yscale("log")
    # 24 points on two near-parallel lines a little apart (what the apps at several batches give),
    # and two points of one series at the same spot.
    items = []
    for i in range(12):
        x = 10 ** (1 + i * 0.12)
        items.append((x, x * 0.05, f"app{i}/16", "C0"))
        items.append((x * 1.05, x * 0.06, f"app{i}/64", "C1"))
    items.append((500.0, 0.2, "mlp0/1", "C2"))
    items.append((500.0, 0.2, "lstm0/1", "C2"))
    for x, y, _, c in items:
        ax.plot([x], [y], "o", color=c)
    legend = ax.legend(handles=[ax.lines[0]], labels=["series"], loc="upper left")
    fig.tight_layout()
    plot_compare.place_labels(ax, items, avoid=[legend])
    renderer = fig.canvas.get_renderer()
    notes = [t for t in ax.texts]
    texts = [t.get_text() for t in notes]
    if len(notes) != 25:
        sys.exit(f"{len(notes)} labels for 25 distinct spots (26 points): {texts}")
    if "mlp0/1, lstm0/1" not in texts:
        sys.exit(f"the two points at one spot were not labelled once, joined: {texts}")
    boxes = [box(t.get_window_extent(renderer)) for t in notes]
    for i in range(len(boxes)):
        for j in range(i + 1, len(boxes)):
            if overlaps(boxes[i], boxes[j]):
                sys.exit(f"labels '{texts[i]}' and '{texts[j]}' overlap")
        if overlaps(boxes[i], box(legend.get_window_extent(renderer))):
            sys.exit(f"label '{texts[i]}' covers the legend")
    print("ok")


if __name__ == "__main__":
    main()
