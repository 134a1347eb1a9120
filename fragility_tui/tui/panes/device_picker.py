"""Where a run computes, as the Runs pane's form and the Compare form offer it."""

from __future__ import annotations

from textual.widgets import Select

from fragility_tui.devices import DeviceReport
from fragility_tui.tui.panes.run_form import DEVICE_CHOICES


class DevicePicker(Select):
    """auto, cpu, any free GPU, then each GPU the last device reading found."""

    def __init__(self, **kwargs) -> None:
        super().__init__(DEVICE_CHOICES, value="auto", allow_blank=False, compact=True,
                         **kwargs)

    def offer(self, report: DeviceReport) -> None:
        """The GPUs of `report` as choices; the choice stays unless its GPU is gone."""
        current = self.value
        options = DEVICE_CHOICES + [(d.short(), d.name) for d in report.gpus]
        self.set_options(options)  # this clears the choice
        self.value = current if current in {value for _, value in options} else "auto"
