"""Values of the state tree that have no Python class of their own."""


class InertObject:
    """An object of a class rckpt does not rebuild: its class path and fields.

    Files converted from torch.save pickles hold such objects (a hippynn
    MetricTracker, say); rckpt never imports or runs the class. Saving an
    InertObject stores it back unchanged.
    """

    __slots__ = ("class_path", "fields")

    def __init__(self, class_path, fields=None):
        self.class_path = class_path
        self.fields = fields

    def __eq__(self, other):
        return (isinstance(other, InertObject) and self.class_path == other.class_path
                and self.fields == other.fields)

    def __repr__(self):
        return f"InertObject({self.class_path!r}, {self.fields!r})"
