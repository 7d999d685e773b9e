"""Files, whatever they hold: writes never through a symbolic link (nofollow), CSV tables read
and written one way (csv_table), and Python source read as syntax trees (pysource) for the
checks that read code. The ground floor: every subpackage may import it; it imports no other
subpackage and no JAX."""
