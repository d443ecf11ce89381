"""Tables and figures from the sweep outputs of examples/sweeps/*.toml.

    python examples/sweeps/tables.py monomial-defective out.parquet [--docs docs/plugins/monomial.md]
    python examples/sweeps/tables.py monomial-critical critical.parquet
    python examples/sweeps/tables.py implicit-bias bias.parquet

Each writes a Markdown table (and a figure where one helps) to examples/output/ (``--out``);
``--docs FILE`` also replaces the generated block of that page (between the markers
``<!-- sweep:NAME -->`` and ``<!-- /sweep:NAME -->``). Reads Parquet, CSV or JSONL.
"""

import argparse
import json
from pathlib import Path

import pandas as pd

OUT = Path(__file__).resolve().parents[1] / "output"

#: Alexander-Hirschowitz: (n_0, k, n_1) where n_1 k-th powers of linear forms in n_0 variables
#: span one dimension less than expected (k >= 3).
AH_EXCEPTIONS = {(3, 4, 5), (4, 4, 9), (5, 4, 14), (5, 3, 7)}


def read(path):
    path = Path(path)
    if path.suffix == ".parquet":
        df = pd.read_parquet(path)
    elif path.suffix == ".csv":
        df = pd.read_csv(path)
    else:
        df = pd.read_json(path, lines=True)
    failed = df[df["status"] != "ok"]
    if len(failed):
        raise SystemExit(f"{len(failed)} failed cell(s) in {path}: {failed['error'].tolist()}")
    return df


def markdown(rows, headers):
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def shallow_expected(n0, n1, k, M):
    """The dimension of the n_1-th secant of the degree-k Veronese of P^(n_0 - 1) (affine
    cone): Alexander-Hirschowitz, with k = 2 the symmetric matrices of rank n_1."""
    if k == 2:
        return min(n0 * n1 - n1 * (n1 - 1) // 2, M)
    return min(n0 * n1, M) - ((n0, k, n1) in AH_EXCEPTIONS)


def monomial_defective(df):
    """The defectiveness table of docs/plugins/monomial.md from a ``describe`` sweep."""
    rows = []
    for r in df.itertuples():
        widths = [int(w) for w in str(r.widths).split(",")]
        k, n, m, rank = int(r.degree), int(r.param_dim), int(r.predictor_dim), int(r.generic_rank)
        hidden = sum(widths[1:-1])
        bound = min(n - hidden, m)
        note = ""
        if len(widths) == 3 and widths[-1] == 1:  # one hidden layer: check against AH
            expected = shallow_expected(widths[0], widths[1], k, m)
            assert rank == expected, (widths, k, rank, expected)
            if rank < bound:
                note = " (k = 2)" if k == 2 else " (AH exception)"
        elif rank < bound and 1 in widths[1:-1]:
            note = " (width-1 bottleneck)"
        verdict = f"**yes**{note}" if rank < bound else ("no (fills)" if rank == m else "no")
        rows.append((r.widths, k, n, hidden, m, bound, rank, verdict))
    return markdown(rows, ["widths", "k", "params", "hidden", "coefficients", "KTB bound",
                           "generic rank", "defective"])


def monomial_critical(df, out, starts_label):
    """The table and figure of examples/monomial_critical_search.py from a ``search`` sweep."""
    import paramgeo

    rows = []
    for r in df.itertuples():
        m = paramgeo.get("monomial", widths=r.widths, degree=int(r.degree)).m
        points = json.loads(r.points)
        seen = sorted({p["near"] or p["stratum"] for p in points if p["verdict"] == "critical"})
        digits = sum(bool(p.get("precision")) for p in points)
        orders = sorted({p["order"] for p in points if p.get("order")})
        rows.append((r.widths, int(r.degree), m, int(r.generic_rank), int(r.generic_rank) == m,
                     int(r.critical), int(r.subnetwork), int(r.near_subnetwork),
                     int(r.dependent_weights), int(r.other), digits,
                     ", ".join(map(str, orders)), " / ".join(seen)))
    headers = ["widths", "degree", "m", "generic_rank", "fills_space", "critical", "subnetwork",
               "near_subnetwork", "dependent", "other", "in 50 digits", "orders", "strata"]
    text = markdown(rows, headers)
    (out / "monomial_critical_search.md").write_text(text)
    pd.DataFrame(rows, columns=headers).to_csv(out / "monomial_critical_search.csv", index=False)
    plt = _pyplot()
    archs = list(dict.fromkeys(df["widths"]))
    fig, axes = plt.subplots(1, len(archs), figsize=(3.2 * len(archs), 3), sharey=True,
                             squeeze=False)
    for ax, widths in zip(axes[0], archs):
        sel = df[df["widths"] == widths]
        ks, sub, dep = sel["degree"], sel["subnetwork"], sel["dependent_weights"]
        ax.bar(ks, sub, label="on a subnetwork")
        ax.bar(ks, dep, bottom=sub, label="dependent weights")
        ax.bar(ks, sel["other"], bottom=sub + dep, label="other")
        ax.set_title(f"widths ({widths})")
        ax.set_xlabel("degree k")
    axes[0][0].set_ylabel(f"critical points found ({starts_label} starts)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "monomial_critical_search.png", dpi=120)
    return critical_pivot(df)


def critical_pivot(df):
    """The table of docs/critical.md: one row per widths, one column per k; a cell is
    subnetwork (near) / dependent / other, with "of N" when only N starts became critical."""
    def cell(r):
        sub = f"{r.subnetwork} ({r.near_subnetwork})" if r.subnetwork else "0"
        dep, other = (f"**{v}**" if v else "0" for v in (r.dependent_weights, r.other))
        short = f" of {r.critical}" if r.critical < r.starts else ""
        return f"{sub} / {dep} / {other}{short}"

    ks = sorted(set(df["degree"]))
    rows = [[widths] + [cell(next(df[(df["widths"] == widths) & (df["degree"] == k)]
                                  .itertuples())) for k in ks]
            for widths in dict.fromkeys(df["widths"])]
    return markdown(rows, ["widths"] + [f"k = {k}" for k in ks])


def implicit_bias(df, out):
    """The alpha scan of examples/hadamard_implicit_bias.py and a figure of the l1 gap."""
    df = df.sort_values("init_scale")
    rows = [(f"{r.init_scale:g}", f"{r.deviation:.2e}", f"{r.l1_gap:.4f}",
             f"{r.l1_distance:.4f}", f"{r.l2_distance:.2e}", f"{r.flow_time:.3g}")
            for r in df.itertuples()]
    text = markdown(rows, ["alpha", "flow limit vs argmin R (max abs)", "l1 gap",
                           "distance to min-l1", "distance to min-l2", "flow time"])
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.loglog(df["init_scale"], df["l1_gap"], "o-", label="l1 gap")
    ax.loglog(df["init_scale"], df["l2_distance"], "s--", label="distance to min-l2")
    ax.set(xlabel="init scale alpha", title="hadamard p = 60: implicit bias against alpha")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "hadamard_implicit_bias.png", dpi=120)
    return text


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def replace_block(page, name, text):
    """Replace the generated block ``name`` of the Markdown file ``page`` by ``text``."""
    begin, end = f"<!-- sweep:{name} -->", f"<!-- /sweep:{name} -->"
    doc = Path(page).read_text()
    if begin not in doc or end not in doc:
        raise SystemExit(f"{page} has no block {begin} ... {end}")
    head, rest = doc.split(begin, 1)
    Path(page).write_text(head + begin + "\n" + text + end + rest.split(end, 1)[1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kind", choices=["monomial-defective", "monomial-critical", "implicit-bias"])
    ap.add_argument("table")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--docs", default=None, help="a docs page whose generated block to replace")
    args = ap.parse_args()
    df, out = read(args.table), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = args.kind.replace("-", "_")
    if args.kind == "monomial-defective":
        text = monomial_defective(df)
    elif args.kind == "monomial-critical":
        name = "monomial_critical_search"
        text = monomial_critical(df, out, ",".join(map(str, sorted(set(df["starts"])))))
    else:
        name = "hadamard_implicit_bias"
        text = implicit_bias(df, out)
    if name != "monomial_critical_search":  # that one writes its full table itself
        (out / f"{name}.md").write_text(text)
    if args.docs:
        replace_block(args.docs, name, text)
    print(text, end="")
    print(f"wrote {out / name}.md" + (f" and the block in {args.docs}" if args.docs else ""))


if __name__ == "__main__":
    main()
