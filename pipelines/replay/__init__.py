"""Rewind and replay, in the order an operator meets it: ``target`` (what to rewind to), ``plan``
(per split the offsets to reload, printed by --dry-run), ``run`` (build the new generation and switch
to it in one commit), ``gc`` (where readers find the current generation; delete older ones)."""
