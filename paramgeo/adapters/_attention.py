"""The torch context every framework call of the torch adapter runs in."""


class math_attention:
    """Run torch's attention in its math backend, the one with forward-mode derivatives
    (the CPU flash kernel and the fused encoder fast path have none), and silence the
    performance warning torch.func prints when it falls back from a batching rule (paramgeo's
    own vmap, not the user's code)."""

    def __init__(self, torch):
        self.torch = torch
        self._ctx = None

    def __enter__(self):
        import warnings

        self._warn = warnings.catch_warnings()
        self._warn.__enter__()
        warnings.filterwarnings("ignore", message=".*[Pp]erformance drop.*")
        warnings.filterwarnings("ignore", message=".*batching rule.*")
        mha = getattr(self.torch.backends, "mha", None)
        self._fastpath = mha.get_fastpath_enabled() if mha is not None else None
        if mha is not None:  # the fused encoder kernels have no forward-mode derivative either
            mha.set_fastpath_enabled(False)
        try:
            from torch.nn.attention import SDPBackend, sdpa_kernel

            self._ctx = sdpa_kernel([SDPBackend.MATH])
            self._ctx.__enter__()
        except Exception:  # noqa: BLE001 - an older torch: its default backends stay
            self._ctx = None
        return self

    def __exit__(self, *exc):
        if self._ctx is not None:
            self._ctx.__exit__(*exc)
        if self._fastpath is not None:
            self.torch.backends.mha.set_fastpath_enabled(self._fastpath)
        self._warn.__exit__(*exc)
        return False
