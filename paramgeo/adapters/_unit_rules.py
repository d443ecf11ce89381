"""From the streams of units a graph reader found to the rule groups they carry: the events
recorded on each stream (its consumers, the layer norms reading it, where it escapes) decide
which rules of :mod:`paramgeo.symmetry.rules` apply (see :mod:`paramgeo.adapters._graph`).
"""

import numpy as np

from ..symmetry import ACTIVATIONS, hidden_layer_group, rules


def apply_rules(reader):
    """Turn each stream's events into rule groups (see :mod:`paramgeo.symmetry.rules`)."""
    n, reading = reader.n, reader.reading
    for s in reader.streams:
        consumers = [e for e in s.events if e[0] == "consumer"]
        escapes = [e for e in s.events if e[0] == "escape"]
        lns = [e for e in s.events if e[0] == "ln"]
        fresh = (False, (), False)
        # batch norm fields: valid when the raw output is read by the batch norm only
        if s.bn is not None and not any(e[1] == fresh and e[0] != "bn" for e in s.events):
            bn = s.bn
            units = [(s.incoming[:-1, j] if s.bias is not None else s.incoming[:, j],
                      None if s.bias is None else s.bias[j], bn["gamma"][j], bn["beta"][j])
                     for j in range(s.k)]
            fields = rules.batchnorm_fields(units, bn["mu"], bn["sigma"], n,
                                            f"{s.label}+{bn['label']}")
            reading.groups.append((f"{s.label}+{bn['label']} rescaling and shift",
                                   rules.field_group(fields, n, f"R^{len(fields)}")))
        # layer norm mean shifts: the stream is read by layer norms only, before activations
        if lns and not consumers and not escapes and all(e[1] == fresh for e in lns) \
                and s.kind == "dense" and s.bn is None:
            W = s.incoming[:-1].T if s.bias is not None else s.incoming.T
            fields = rules.mean_shift_fields(W, s.bias, n, s.label)
            reading.groups.append((f"{s.label} mean shift",
                                   rules.field_group(fields, n, f"R^{len(fields)}")))
        if s.layer_norm:
            for _, stage, (label, _, weight, bias) in consumers:
                if stage == fresh and bias is not None:
                    reader.hyperplane(s.label, label, weight, bias)
        if escapes or lns or not consumers:
            if consumers and escapes:
                reading.notes.append(f"{s.label}: its units {escapes[0][2]}; no unit symmetry")
            continue
        if s.kind == "custom":
            names = list(s.part_names) + [f"{e[2][0]} column" for e in consumers]
            for j in range(s.k):
                slots = [part[j] for part in s.parts] + [o[:, j] for o in
                                                        (e[2][1] for e in consumers)]
                reading.discover.append((f"{s.label} unit {j}", slots, names))
            continue
        stages = {e[1] for e in consumers}
        if len(stages) > 1:
            reading.notes.append(f"{s.label}: read at different stages; no unit symmetry")
            continue
        (after_bn, acts, maxpooled), = stages
        outs = [e[2][1] for e in consumers]
        out_of = [np.concatenate([o[:, j] for o in outs]) for j in range(s.k)]
        inp_of = [s.unit_inp(j, (after_bn,)) for j in range(s.k)]
        act = acts[-1] if len(acts) == 1 else ("other" if acts else None)
        word = {"conv": "channel", "dense": "neuron", "embed": "coordinate"}.get(s.kind,
                                                                                "feature")
        for j in range(s.k):  # strata units: every parameter producing the unit is an input
            full = np.concatenate([s.incoming[:, j]] + ([np.array(
                [s.bn["gamma"][j], s.bn["beta"][j]])] if after_bn else []))
            reading.units.append((s.label, f"{s.label} {word} {j}", full, out_of[j],
                                  act or ("maxpool" if maxpooled else "identity")))
        units = list(zip(inp_of, out_of))
        if act is None and not maxpooled:
            if s.kind == "affine" or after_bn:
                reading.groups.append((f"{s.label} feature rescalings",
                                       rules.rescaling_torus(units, n, signed=True)))
            else:
                reading.groups.append((f"{s.label} GL({s.k})",
                                       hidden_layer_group(s.k, incoming=(s.incoming,),
                                                           outgoing=outs)))
        elif ACTIVATIONS.get(act) == "homogeneous":
            reading.groups.append((f"{s.label} {act} rescalings",
                                   rules.rescaling_torus(units, n, signed=False)))
        elif ACTIVATIONS.get(act) == "odd" and not maxpooled:
            reading.groups.append((f"{s.label} {act} sign flips",
                                   rules.sign_flips(units, n)))
        if act is None and not maxpooled:
            _bias_transfer(reader, s, after_bn, consumers)
        if s.kind != "affine" and not (act is None and not maxpooled and not after_bn):
            slots = [np.concatenate([s.incoming[:, j]]
                                    + ([np.array([s.bn["gamma"][j], s.bn["beta"][j]])]
                                       if s.bn is not None else []) + [out_of[j]])
                     for j in range(s.k)]
            reader.perm_classes.append((f"{s.label} units", np.stack(slots)))
            if s.bn is not None:
                reader.perm_adjust[f"{s.label} units"] = rules.batchnorm_adjust(
                    s.bn["gamma"], s.bn["beta"], s.bn["mu"], s.bn["sigma"])
    if reader.fields:
        reading.groups.append(("layer-norm bias transfers",
                               rules.field_group(reader.fields, n, f"R^{len(reader.fields)}")))
    perms = rules.unit_permutations(reader.perm_classes, n, reader.perm_adjust)
    if perms is not None:
        reading.groups.append(("unit permutations", perms))


def _bias_transfer(reader, s, after_bn, consumers):
    """Units with no activation between two affine maps: the producer's offset of unit j
    (its bias, batch norm's shift, or for an embedding every row's coordinate j) + u_j and each
    dense consumer's bias - W[:, j] u_j leave the consumers' outputs unchanged (one field per
    unit; needs every consumer dense with a bias, reading the units unflattened)."""
    import scipy.sparse as sp

    n = reader.n
    offset = (s.bn["beta"] if after_bn else s.bias if s.bias is not None else
              s.incoming.T if s.kind == "embed" else None)
    if offset is None or not consumers or any(
            bias is None or np.ndim(weight) != 2 or weight.shape[1] != s.k
            for _, _, (_, _, weight, bias) in consumers):
        return
    fields = []
    for j in range(s.k):
        vec = np.zeros(n)
        vec[np.ravel(offset[j])] = 1.0
        rows = np.concatenate([bias for _, _, (_, _, _, bias) in consumers])
        cols = np.concatenate([weight[:, j] for _, _, (_, _, weight, _) in consumers])
        A = sp.csr_matrix((-np.ones(len(rows)), (rows, cols)), shape=(n, n))
        fields.append((A, vec, f"{s.label} unit {j}: offset into the next biases"))
    reader.reading.groups.append((f"{s.label} bias transfer",
                                  rules.field_group(fields, n, f"R^{len(fields)}")))
