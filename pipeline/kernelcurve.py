"""Kernels started with encrypted channels, where this project starts them itself.

ipykernel (7.4 on) logs "Kernel is running over TCP without encryption" at every
start unless its manager provisions CurveZMQ keys for its channels: one warning
for each notebook a documentation build runs. jupyter_client (8.10 on) provisions
them when ``KernelManager.transport_encryption`` is ``"auto"`` and the kernelspec
declares support, as ipykernel's does. The tools that start kernels (myst-nb
through nbclient, in the documentation build) create their kernel managers with no
configuration to set that through, so :func:`encrypt_by_default` sets the trait's
default for the calling process. ``docs/conf.py`` and
:func:`pipeline.lessons.prose.refresh` call it. Importing this module loads nothing.
"""

from __future__ import annotations

__all__ = ["available", "encrypt_by_default"]


def available() -> bool:
    """Whether this jupyter_client can provision keys and this libzmq has CurveZMQ."""
    import zmq
    from jupyter_client.manager import KernelManager

    return "transport_encryption" in KernelManager.class_trait_names() and bool(zmq.has("curve"))


def encrypt_by_default() -> bool:
    """Make every kernel manager this process creates provision CurveZMQ keys.

    Returns:
        Whether it could (False with an older jupyter_client, or a libzmq without
        CurveZMQ: kernels then start as before, unencrypted, and say so).
    """
    if not available():
        return False
    from jupyter_client.manager import KernelManager

    KernelManager.transport_encryption.default_value = "auto"
    return True
