"""The ``recording:`` section of the parameters file: storage, topics, evaluation and replay settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional

from hexapod_control.bags.topics import resolve_topic_names
from hexapod_control.errors import ParameterError
from hexapod_control.model.parameters import HexapodParameters, load_parameters
from hexapod_control.ros.conventions import TOPICS

STORAGE_FORMATS = ("mcap", "sqlite3")
MATCHING_METHODS = ("interpolate", "latest")


@dataclass(frozen=True)
class EvaluationSettings:
    steady_state_start: float  # [s] after the first reference
    reference_matching: str  # interpolate | latest
    saturation_tolerance: float  # relative to the force limit
    derivative_window: float  # [s] Savitzky-Golay window of the model check
    derivative_order: int
    model_check_stride: int


@dataclass(frozen=True)
class RecordingSettings:
    storage: str  # mcap | sqlite3
    topics: tuple[str, ...]  # keys of ros_conventions.TOPICS
    output_directory: str
    evaluation: EvaluationSettings
    replay_reference_matching: str
    source: str = ""  # the parameters file the section came from

    def topic_names(self, overrides: Optional[Mapping[str, str]] = None) -> dict[str, str]:
        """key -> topic name for every known key: the defaults of TOPICS with ``overrides``."""
        return resolve_topic_names(overrides)


def load_recording_settings(parameters: HexapodParameters) -> RecordingSettings:
    """Read and validate ``hexapod.recording``; errors name the key and the file."""
    section = parameters.section("recording")
    section.reject_unknown({"storage", "topics", "output_directory", "evaluation", "replay"})
    topics = section.mapping.get("topics")
    if (
        not isinstance(topics, list)
        or not topics
        or any(not isinstance(t, str) or t not in TOPICS for t in topics)
        or len(set(topics)) != len(topics)
    ):
        raise ParameterError(
            f"{parameters.source}: {section.path}.topics: expected distinct keys of {sorted(TOPICS)}, got {topics!r}"
        )
    evaluation = section.subsection("evaluation")
    evaluation.reject_unknown(
        {
            "steady_state_start",
            "reference_matching",
            "saturation_tolerance",
            "derivative_window",
            "derivative_order",
            "model_check_stride",
        }
    )
    replay = section.subsection("replay")
    replay.reject_unknown({"reference_matching"})
    tolerance = evaluation.non_negative("saturation_tolerance")
    if tolerance >= 1.0:
        raise ParameterError(
            f"{parameters.source}: {evaluation.path}.saturation_tolerance: must be below 1, got {tolerance}"
        )
    return RecordingSettings(
        storage=section.text("storage", STORAGE_FORMATS),
        topics=tuple(topics),
        output_directory=section.text("output_directory"),
        evaluation=EvaluationSettings(
            steady_state_start=evaluation.non_negative("steady_state_start"),
            reference_matching=evaluation.text("reference_matching", MATCHING_METHODS),
            saturation_tolerance=tolerance,
            derivative_window=evaluation.positive("derivative_window"),
            derivative_order=evaluation.integer("derivative_order", minimum=1),
            model_check_stride=evaluation.integer("model_check_stride", minimum=1),
        ),
        replay_reference_matching=replay.text("reference_matching", MATCHING_METHODS),
        source=parameters.source,
    )


def recording_settings_or_default(parameters: HexapodParameters) -> tuple[RecordingSettings, Optional[str]]:
    """The file's ``recording`` section, or the shipped one with a note when the file has none.

    A lab evaluating its robot's bags with its own parameters file (geometry, limits) should not
    have to copy the evaluation settings into it.
    """
    if "recording" in parameters.extensions:
        return load_recording_settings(parameters), None
    shipped = load_parameters()
    note = f"{parameters.source} has no recording section: evaluation settings from {shipped.source}"
    return load_recording_settings(shipped), note
