"""Registry: entry-point discovery, registration, plugin files, declaration validation.

Covers: ``paramgeo.contract.registry``.
"""

import sys
import textwrap

import pytest

import paramgeo
from paramgeo.contract import registry
from tests.test_parameterization import Cubic


def test_builtins_come_from_entry_points():
    eps = registry._discover(refresh=True)
    assert {"uut", "hadamard"} <= set(eps)
    assert eps["uut"].value == "paramgeo_plugins.uut:UUT"


def test_unknown_name_lists_available():
    with pytest.raises(paramgeo.PluginNotFoundError) as info:
        paramgeo.get("nosuch")
    assert "available: " in str(info.value) and "uut" in str(info.value)


def test_register_forward_only_class():
    try:
        paramgeo.register(Cubic)
        assert "cubic-test" in paramgeo.available()
        assert paramgeo.get("cubic-test", k=2).n == 5
        other = type("Other", (Cubic,), {})  # same name, another class
        with pytest.raises(paramgeo.ContractError, match="already registered"):
            paramgeo.register(other)
    finally:
        registry.unregister("cubic-test")


def test_declaration_must_match_overrides():
    class Liar(Cubic):
        capabilities = frozenset({"symmetry"})

    with pytest.raises(paramgeo.ContractError, match="declares 'symmetry' but does not implement"):
        paramgeo.register(Liar)

    class Shy(Cubic):
        def symbolic(self):
            return [], []

    with pytest.raises(paramgeo.ContractError, match="overrides symbolic\\(\\) but does not declare"):
        paramgeo.register(Shy)

    with pytest.raises(paramgeo.ContractError, match="unknown capabilities"):
        paramgeo.register(type("Odd", (Cubic,), {"capabilities": frozenset({"teleport"})}))


def test_load_plugin_file(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text(textwrap.dedent('''
        import autograd.numpy as anp
        from paramgeo import Parameterization, ParamSpec, Size

        class Square(Parameterization):
            name = "square-file"
            size_params = {"p": Size("int", default=3)}
            def make_spec(self):
                return ParamSpec(w=(self.p,))
            def make_predictor_shape(self):
                return (self.p,)
            def forward(self, theta):
                return theta ** 2
    '''))
    try:
        assert paramgeo.load_plugin_file(path) == ["square-file"]
        assert paramgeo.get("square-file").m == 3
    finally:
        registry.unregister("square-file")
    with pytest.raises(paramgeo.ParamgeoError, match="does not exist"):
        paramgeo.load_plugin_file(tmp_path / "missing.py")
    broken = tmp_path / "broken.py"
    broken.write_text("import nosuchmodule_xyz\n")
    with pytest.raises(paramgeo.ParamgeoError, match="failed to import: ModuleNotFoundError"):
        paramgeo.load_plugin_file(broken)


def test_discovery_through_a_fake_distribution(tmp_path, monkeypatch):
    """A third-party package declaring the entry point is found by importlib.metadata."""
    (tmp_path / "fakepkg_paramgeo.py").write_text(
        "from tests.test_parameterization import Cubic\n"
        "class Fake(Cubic):\n    name = 'fake-ep'\n"
    )
    dist = tmp_path / "fakepkg_paramgeo-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fakepkg-paramgeo\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[paramgeo.parameterizations]\nfake-ep = fakepkg_paramgeo:Fake\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        registry.refresh()
        assert "fake-ep" in paramgeo.available()
        assert paramgeo.get("fake-ep").name == "fake-ep"
    finally:
        registry.unregister("fake-ep")
        sys.modules.pop("fakepkg_paramgeo", None)
        monkeypatch.undo()
        registry.refresh()
    assert "fake-ep" not in paramgeo.available()
