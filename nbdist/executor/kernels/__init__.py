"""NumPy kernels, one module per op family. Each module registers its kernels
with ``nbdist.executor.kernel.register_kernel`` when imported; the registry
imports them by name (``KERNEL_MODULES``) on the first kernel lookup."""
