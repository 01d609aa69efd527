"""The parameters object: both shipped sets load, and every kind of bad file is named precisely."""

import math
import re

import pytest
import yaml

from hexapod_control import ParameterError, load_parameters
from hexapod_control.model.parameters import default_parameters_path


def write_variant(tmp_path, edit):
    document = yaml.safe_load(default_parameters_path().read_text())
    edit(document["hexapod"])
    path = tmp_path / "variant.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def test_experiments_set_matches_the_thesis():
    parameters = load_parameters()
    g = parameters.geometry
    assert (g.base_side, g.leg_length, g.platform_offset) == (0.866, 0.378, 0.090)
    assert parameters.bodies.platform.mass == 1.7917
    # Table 6.2 leg row (46.54, 46.54, 0.35) kg cm^2 remapped so the small moment is about Y.
    assert parameters.bodies.leg.inertia == pytest.approx((46.54e-4, 0.35e-4, 46.54e-4))
    assert parameters.limits.actuator_force_max == 333.0
    assert parameters.limits.actuator_speed_max == 0.65


def test_validation_set_matches_table_6_1():
    parameters = load_parameters(default_parameters_path("hexapod_validation.yaml"))
    assert parameters.geometry.leg_length == 0.3689
    assert parameters.bodies.platform.mass == 2.085
    assert parameters.bodies.leg.inertia == pytest.approx((54.66e-4, 0.50e-4, 54.78e-4))


@pytest.mark.parametrize(
    "edit, key, message",
    [
        (lambda h: h["geometry"].pop("leg_length"), "hexapod.geometry.leg_length", "missing key"),
        (lambda h: h["geometry"].update(base_side=866.0), "hexapod.geometry.base_side", "metres"),
        (lambda h: h["geometry"].update(platform_offset=-0.09), "hexapod.geometry.platform_offset", "positive"),
        (lambda h: h["geometry"].update(leg_length=0.17), "hexapod.geometry.leg_length", "too short"),
        (lambda h: h["bodies"]["leg"].update(inertia=[46.54, 0.35, 46.54]), "hexapod.bodies.leg.inertia", "kg\\*m\\^2"),
        (lambda h: h["bodies"]["platform"].update(inertia=[0.0, 0.02, 0.05]), "hexapod.bodies.platform.inertia", "positive"),
        (lambda h: h["bodies"]["s_part1"].update(mass=-1.0), "hexapod.bodies.s_part1.mass", "positive"),
        (lambda h: h["bodies"].pop("pu_part2"), "hexapod.bodies.pu_part2", "missing section"),
        (lambda h: h["limits"].update(actuator_force_max="333 N"), "hexapod.limits.actuator_force_max", "number"),
        (lambda h: h["limits"].update(actuator_position_max=0.5), "hexapod.limits.actuator_position_max", "runs off"),
        (lambda h: h.update(gravity=math.nan), "hexapod.gravity", "finite"),
        (lambda h: h["geometry"].update(leg_lenght=0.378), "hexapod.geometry", "unknown key"),
    ],
)
def test_bad_files_name_the_key_and_the_file(tmp_path, edit, key, message):
    path = write_variant(tmp_path, edit)
    with pytest.raises(ParameterError) as error:
        load_parameters(path)
    text = str(error.value)
    assert str(path) in text
    assert key in text
    assert re.search(message, text), text


def test_unreadable_and_malformed_files(tmp_path):
    with pytest.raises(ParameterError, match="cannot read"):
        load_parameters(tmp_path / "absent.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("hexapod: [unclosed")
    with pytest.raises(ParameterError, match="not valid YAML"):
        load_parameters(broken)


def test_overrides_are_validated_again():
    parameters = load_parameters()
    assert parameters.with_geometry(leg_length=0.3689).geometry.leg_length == 0.3689
    with pytest.raises(ParameterError, match="too short"):
        parameters.with_geometry(leg_length=0.1)
