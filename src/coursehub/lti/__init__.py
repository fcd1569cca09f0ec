"""LTI Advantage from the course app's side: the tool's key pair and grade passback (AGS).

:mod:`coursehub.lti.keys` makes and reads the tool's RSA key pair and its
public key set; :mod:`coursehub.lti.ags` talks to the platform (OAuth 2.0
client-credentials token, line items, scores); :mod:`coursehub.lti.passback`
sends an assignment's nbgrader scores; ``coursehub lti keygen|jwks|passback``
(:mod:`coursehub.lti.cli`). Sign-in itself is the hub's
(:mod:`coursehub.spawn.lti`) and the catalog's (:mod:`coursehub.catalog.lti.launch`).
See docs/lti.md, "Grade passback".
"""
