"""Experiment: are the critical points of deep monomial networks subnetworks?

The seed paper (Kohn, Marchetti, Shahverdi, Trager et al., "Singular learning and Occam's razor in
deep monomial networks") shows that for large enough activation degree k the critical points of
the parameterization theta -> coefficients of f_theta lie on subnetworks (inactive or redundant
neurons). For a few small architectures and k = 2..6 this script runs
``paramgeo.critical.search`` (minimise s_R/s_1 of J on |theta| = 1 from random starts, Newton
polish, classify each end point) and tabulates per degree: how many starts reached a critical
point (rank below the generic rank under the tolerance policy), how many of those lie on a
subnetwork stratum explaining their rank or are certified near one (``paramgeo.critical.
near_stratum``: s_R/s_1 decays like a power of the distance to it, and the power law accounts
for the lost rank), how many have linearly dependent incoming weights in a layer without
proportional pairs ("dependent", not a subnetwork), and how many the engine cannot explain
("other"). End points whose s_R/s_1 is below float64's resolution and that float64 cannot
explain are classified again with 50-digit singular values of the exact Jacobian
(``paramgeo.geometry.precision``), which resolves the power law of their approach to a stratum; the
table counts them ("in 50 digits") and lists the fitted orders. Output: a Markdown table, a CSV
and a figure in examples/output/.

Usage: python examples/monomial_critical_search.py [--starts N] [--max-degree K] [--quick]
"""

import argparse
import csv
import time
from pathlib import Path

import paramgeo
from paramgeo.critical import search

ARCHITECTURES = [(2, 2, 1), (2, 3, 1), (3, 2, 1), (3, 3, 1), (2, 2, 2, 1)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=12)
    parser.add_argument("--max-degree", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="two architectures, k <= 4")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "output"))
    args = parser.parse_args()
    archs = ARCHITECTURES[:2] if args.quick else ARCHITECTURES
    max_k = min(args.max_degree, 4) if args.quick else args.max_degree
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for widths in archs:
        for k in range(2, max_k + 1):
            try:
                p = paramgeo.get("monomial", widths=widths, degree=k)
            except paramgeo.ParamgeoError as exc:
                print(f"skip widths={widths} k={k}: {exc}")
                continue
            t0 = time.perf_counter()
            res = search(p, starts=args.starts, seed=args.seed)
            strata_seen = sorted({pt["near"] or pt["stratum"] for pt in res.points
                                  if pt["verdict"] == "critical"})
            row = {
                "widths": ",".join(map(str, widths)), "degree": k, "n": p.n, "m": p.m,
                "generic_rank": res.generic_rank, "starts": res.starts,
                "critical": res.critical, "subnetwork": res.subnetwork,
                "near_subnetwork": res.near_subnetwork, "dependent": res.dependent_weights,
                "orbit_degenerate": res.orbit_degenerate, "other": res.other,
                "not_reached": res.starts - res.critical,
                "in_50_digits": sum(bool(pt["precision"]) for pt in res.points),
                "orders": " ".join(map(str, sorted({pt["order"] for pt in res.points
                                                    if pt["order"]}))),
                "fills_space": res.generic_rank == p.m,
                "strata": " / ".join(strata_seen), "seconds": round(time.perf_counter() - t0, 1),
            }
            rows.append(row)
            print(f"widths={row['widths']:<8} k={k}  R={res.generic_rank:<3} m={p.m:<4} "
                  f"critical {res.critical:>3}/{res.starts}  subnetwork {res.subnetwork:>3} "
                  f"(near {res.near_subnetwork})  dependent {res.dependent_weights:>3}  "
                  f"other {res.other:>3}  ({row['seconds']} s)", flush=True)
            for i, pt in enumerate(res.points):
                if "other" in pt["causes"] or "dependent-weights" in pt["causes"]:
                    print(f"    {','.join(pt['causes'])} #{i}: rank {pt['rank']}, s_R/s_1 "
                          f"{pt['ratio']:.1e}, stratum {pt['stratum']}, nearest condition "
                          f"{pt['subnetwork_distance']:.2e}")
    keys = list(rows[0])
    with open(out / "monomial_critical_search.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)
    shown = ["widths", "degree", "n", "m", "generic_rank", "fills_space", "starts", "critical",
             "subnetwork", "near_subnetwork", "dependent", "other", "in_50_digits", "orders",
             "strata"]
    lines = ["| " + " | ".join(shown) + " |", "|" + "---|" * len(shown)]
    lines += ["| " + " | ".join(str(r[c]) for c in shown) + " |" for r in rows]
    (out / "monomial_critical_search.md").write_text("\n".join(lines) + "\n")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no figure")
        return
    fig, axes = plt.subplots(1, len(archs), figsize=(3.2 * len(archs), 3), sharey=True)
    for ax, widths in zip(axes if len(archs) > 1 else [axes], archs):
        sel = [r for r in rows if r["widths"] == ",".join(map(str, widths))]
        ks = [r["degree"] for r in sel]
        ax.bar(ks, [r["subnetwork"] for r in sel], label="on a subnetwork")
        ax.bar(ks, [r["dependent"] for r in sel], bottom=[r["subnetwork"] for r in sel],
               label="dependent weights")
        ax.bar(ks, [r["other"] for r in sel],
               bottom=[r["subnetwork"] + r["dependent"] for r in sel], label="other")
        ax.set_title(f"widths {widths}")
        ax.set_xlabel("degree k")
    axes[0].set_ylabel(f"critical points found ({args.starts} starts)")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "monomial_critical_search.png", dpi=120)
    print(f"wrote {out}/monomial_critical_search.{{md,csv,png}}")


if __name__ == "__main__":
    main()
