"""kernelscale: scalable kernel machines (DSG family, Random Binning, EigenPro, baselines)."""

__version__ = "0.1.0"
