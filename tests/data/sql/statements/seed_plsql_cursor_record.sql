DECLARE
  p_run_ind VARCHAR2;
  TYPE acbal_cv IS REF CURSOR;
  rec_dal_acbal T_DAL_ACBAL%ROWTYPE;
BEGIN

  IF p_run_ind = 'STEP1' THEN
    OPEN acbal_cv FOR
      SELECT product_type_code,product_code FROM T_DAL_ACBAL
        WHERE AC_CODE > ' ' AND UPDT_FLG != '0'
        AND UPDAT_FLG != '3' AND ROWNUM < 150001;

  ELSIF p_run_ind = 'STEP2' THEN
    OPEN acbal_cv FOR
      SELECT product_type_code,product_code FROM T_DAL_ACBAL
        WHERE AC_CODE > ' ' AND UPDT_FLG != '0'
        AND UPDAT_FLG != '3';

  END IF;

  LOOP
    FETCH acbal_cv INTO rec_dal_acbal;
    EXIT WHEN cur_stclerk%NOTFOUND;

    UPDATE T_AC_MSTR
      SET prd_type_code = rec_dal_acbal.product_type_code,
          prd_code = rec_dal_acbal.product_code
    ;

  END LOOP;

  COMMIT;
END;
