"""What a run leaves behind and every reader of it: its outcome and escape, its metrics file,
its workdir's records, a sweep point's record and a sweep's result rows. No JAX."""
