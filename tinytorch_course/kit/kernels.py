"""Kernels that talk over unix sockets instead of TCP ports.

jupyter_client picks "free" TCP ports by binding and releasing them; another process starting a kernel
at the same moment can bind one first, and our kernel dies at start ("Address already in use"). Unix
sockets in a folder of the kernel's own cannot collide.
"""
import os
import shutil
import tempfile

from jupyter_client.manager import AsyncKernelManager
from traitlets import default


class UnixSocketKernelManager(AsyncKernelManager):
    """An `AsyncKernelManager` whose kernel's sockets are unix sockets: at `ip` when it is set, or
    else in a new private folder, removed with the kernel."""

    _private_folder = None

    @default("transport")
    def _transport_default(self):
        return "ipc"

    def _ip_default(self):
        self._private_folder = tempfile.mkdtemp(prefix="tinytorch-kernel-")
        return os.path.join(self._private_folder, "kernel")

    async def _async_cleanup_resources(self, restart=False):
        await super()._async_cleanup_resources(restart=restart)
        if self._private_folder and not restart:
            shutil.rmtree(self._private_folder, ignore_errors=True)
