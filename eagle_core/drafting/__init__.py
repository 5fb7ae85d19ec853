"""The EAGLE heads and drafting: a head turns the target's features into a draft token tree.

    head        the EAGLE-1/2 head (its layers in head_layers), loading and saving it
    head3       the EAGLE-3 head, which reads three of the target's layers
    shipped     the heads this project trains and ships for the default target, and random ones
    drafter     the Drafter: chain, EAGLE-1 static tree, EAGLE-2 dynamic tree
    eagle3      the EAGLE-3 drafter: the same trees from an EAGLE-3 head
"""
