"""busbw against message size, one line per series, as a PNG."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def plot_busbw(path, title, named_series, note=None):
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    for name, s in named_series.items():
        xs = sorted(s)
        ax.plot(xs, [s[x]["busbw_gbps"] for x in xs], marker="o", markersize=3, label=name)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("busbw (GB/s, 1e9 B/s)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    if note:
        fig.text(0.01, 0.01, note, fontsize=7, alpha=0.8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
