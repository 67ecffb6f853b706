-- c ${x}
/* x */ DELETE FROM `a``b` WHERE c = ${json:o.p[0]?} # end