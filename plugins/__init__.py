"""Built-in paramgeo parameterizations, installed as ``paramgeo_plugins``.

Each module is written exactly as a third-party plugin would be, against paramgeo's public API,
and is registered through the ``paramgeo.parameterizations`` entry-point group in setup.cfg.
"""
