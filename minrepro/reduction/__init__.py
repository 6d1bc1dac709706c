"""The reduce command's driver (the execution side of the Lithium seam): establish the original failure, build
the guard (a differential oracle), run the search from `minrepro.reducers`, verify cold, and write the result
in a form a maintainer accepts. The search sees only an `Oracle` (`minrepro.reducers.oracle`)."""
