"""AC-Bench (suite 4): emotion under image–description conflict (P_img, P_txt, TBR, LSS) and CECS."""
