"""The emulated Ascend-like NPU runtime (device cost model + host software stack)."""
