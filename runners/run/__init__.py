"""The run: the resumable loop that writes cells into the store, its batches and host work,
admission, stopping, the device queue and progress events."""
