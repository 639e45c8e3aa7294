"""The world's emotion rule: three binary axes of a scene, visible in its pixels, pick one of eight
emotion labels (EmoSet's eight, in the order AC-Bench App. C.3 lists them).

================  ===========  ===========  =============  =========
brightness        warm, calm   warm, sharp  cool, calm     cool, sharp
================  ===========  ===========  =============  =========
bright            amusement    excitement   contentment    awe
dark              disgust      anger        sadness        fear
================  ===========  ===========  =============  =========

"calm"/"sharp" is the majority shape family (circle, square / triangle, cross; a tie counts as calm).
Brightness carries valence, so the *opposite* emotion flips brightness (anger for excitement) and the
*adjacent* emotion flips warmth (awe for excitement, same valence).
"""

from __future__ import annotations

from faithtests.world.scene import SHAPE_FAMILY, Scene

#: The eight labels, in the order of the App. C.3 prompts.
EMOTIONS: tuple[str, ...] = (
    "amusement", "anger", "awe", "contentment", "disgust", "excitement", "fear", "sadness",
)
EMOTION_TABLE: dict[tuple[str, str, str], str] = {
    ("bright", "warm", "calm"): "amusement", ("bright", "warm", "sharp"): "excitement",
    ("bright", "cool", "calm"): "contentment", ("bright", "cool", "sharp"): "awe",
    ("dark", "warm", "calm"): "disgust", ("dark", "warm", "sharp"): "anger",
    ("dark", "cool", "calm"): "sadness", ("dark", "cool", "sharp"): "fear",
}
_AXES = {e: k for k, e in EMOTION_TABLE.items()}


def shape_family(scene: Scene) -> str:
    sharp = sum(1 for o in scene.objects if SHAPE_FAMILY[o.shape] == "sharp")
    return "sharp" if 2 * sharp > len(scene.objects) else "calm"


def emotion_from(brightness: str, warmth: str, family: str) -> str:
    return EMOTION_TABLE[(brightness, warmth, family)]


def emotion_of(scene: Scene) -> str:
    """The scene's ground-truth emotion (table in the module docstring)."""
    return emotion_from(scene.background.brightness, scene.background.warmth, shape_family(scene))


def adjacent(emotion: str) -> str:
    b, w, f = _AXES[emotion]
    return EMOTION_TABLE[(b, "cool" if w == "warm" else "warm", f)]


def opposite(emotion: str) -> str:
    b, w, f = _AXES[emotion]
    return EMOTION_TABLE[("dark" if b == "bright" else "bright", w, f)]
